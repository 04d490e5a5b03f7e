# Two commands set up a fresh machine: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed on its own, first, so that the package's range (torch>=2.1) is already met
# and pip never pulls a multi-GB CUDA build. Point TORCH_SPEC elsewhere for another build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install test demo bench corpus lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

# Two workers: most tests wait on a child process (torch's import, a window, a stall), so two at a
# time finish in about 0.8x the time on two cores. Tests that share a fixed resource (torchrun's
# port) are grouped onto one worker (xdist_group).
test: install
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n 2 --dist loadgroup

demo: install
	$(VENV)/bin/tuidebug assets/examples/nan_after_warmup.py

bench: install
	$(PY) bench/run.py

# The whole bug corpus (corpus/README.md): scores every case and writes CORPUS.md. `make test`
# runs only its quick subset (tests/test_corpus.py).
corpus: install
	$(PY) corpus/run.py

clean:
	rm -rf $(VENV) build *.egg-info
