"""The child process's entry point: connect, install the hooks, run the script as ``__main__``.

Started by the launcher as ``python -c "...runner import main; main()"`` with the address, token and configuration in its
environment (removed before the script runs, so processes it starts don't connect too). The script
sees what ``python script.py args`` would show it: the same ``sys.argv``, ``__name__``, its
directory first on ``sys.path``, and the same exit code and traceback.
"""

from __future__ import annotations

import _thread
import builtins
import faulthandler
import importlib.machinery
import io
import json
import mmap
import os
import runpy
import signal
import sys
import time
import traceback
from types import TracebackType

import torch

from tuidebug import protocol
from tuidebug.agent import core, hooks
from tuidebug.agent.client import AgentClient, ConnectionRefused
from tuidebug.agent.core import Agent, AgentConfig
from tuidebug.agent.sandbox import WriteSandbox
from tuidebug.agent.crash import analyse, is_out_of_memory
from tuidebug.agent.memory import MemoryReader, one_heap, return_large_blocks, under_address_cap
from tuidebug.agent.reattach import Reattach
from tuidebug.agent.output import mark_probe_output, survive_closed_pipes
from tuidebug.protocol import Event, State
from tuidebug.sites import user_frames

_OWN_FILES = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep, os.path.abspath(runpy.__file__),
              "<frozen runpy>")
NO_SUCH_MODULE = 2  # the code tuidebug gives for a missing script, too


def _name_the_process(target: str, args: list[str]) -> None:
    """ps, htop and nvidia-smi show ``tuidebug: train.py --lr 3`` for the child, not the bootstrap's
    ``python -c from tuidebug...``. The agent runs in the user's interpreter, so a setproctitle that cannot
    be imported there leaves python's title rather than stopping the training."""
    try:
        import setproctitle
    except ImportError:
        return
    setproctitle.setproctitle(" ".join(["tuidebug:", os.path.basename(target), *args]))


def main() -> None:
    _spare_address_space()  # before the agent's threads exist
    config = _config()
    address = os.environ.pop(protocol.ENV_ADDRESS, "")
    token = os.environ.pop(protocol.ENV_TOKEN, "")
    agent_config = AgentConfig.from_dict(config.get("agent", {}))
    argv = [config["target"], *config["args"]]
    _name_the_process(config["target"], config["args"])
    survive_closed_pipes(config["target"])
    _dump_stacks_on_signal(config.get("stack_file"))  # before the hello: the TUI signals only a process that said it
    if config.get("marks_probe_output"):
        mark_probe_output()

    client = AgentClient(address, token, sampler=MemoryReader().read)
    agent = Agent(agent_config, client)
    core.CURRENT = agent
    try:
        client.connect(argv, torch.__version__, agent.resolve)
    except ConnectionRefused as exc:
        print(f"tuidebug: {exc}; running the script without the agent", file=sys.stderr)
        agent.client = None
    if agent_config.stop_on_disconnect:
        client.on_disconnect = _thread.interrupt_main
    elif agent_config.attachable and agent.client is not None:
        Reattach(client, config["target"], config["args"]).enable()
    client.immediate["cancel"] = lambda args: agent.probes.cancel.set()
    hooks.install(agent)
    if agent_config.scratch_writes:
        WriteSandbox(agent_config.scratch_writes).install()
    agent.send(State(state="running", step=0))

    code = run_target(agent, config["target"], config["args"], bool(config.get("module")))
    agent.script_running = False
    agent.loop_ended()
    agent.probes.loop_ended()
    sys.stdout.flush()
    sys.stderr.flush()
    agent.send(Event(kind="script_end", message=f"script ended with code {code}", time=time.time(), step=agent.step))
    if agent.client is not None and agent_config.post_mortem:
        agent.control.hold(f"script exited with code {code}", "ended", state="ended")
    if agent.client is not None:
        agent.client.close()
    sys.exit(code)


def _config() -> dict:
    """What to run: from tuidebug (in the environment), or, for a worker another launcher starts
    (``python -m tuidebug.agent train.py ARGS`` with the address and token of ``tuidebug listen``),
    from the command line."""
    if protocol.ENV_CONFIG in os.environ:
        return json.loads(os.environ.pop(protocol.ENV_CONFIG))
    if len(sys.argv) < 2:
        print("usage: python -m tuidebug.agent SCRIPT [ARGS...], with TUIDEBUG_ADDRESS and TUIDEBUG_TOKEN "
              "set as tuidebug listen prints them", file=sys.stderr)
        sys.exit(NO_SUCH_MODULE)
    return {"target": sys.argv[1], "args": sys.argv[2:]}


_STACK_FILE: list = []  # kept open for faulthandler, which writes to its descriptor from a signal handler


def _dump_stacks_on_signal(path: str | None) -> None:
    """SIGUSR1 writes every thread's stack to ``path``: where a stalled run is stuck, even in native code."""
    if not path or not hasattr(signal, "SIGUSR1"):
        return
    try:
        handle = open(path, "a", encoding="utf-8")
    except OSError:
        return
    _STACK_FILE.append(handle)
    faulthandler.register(signal.SIGUSR1, file=handle, all_threads=True, chain=False)


# Address space held back under an RLIMIT_AS cap and given up when the script runs out of memory, so that
# the checks after it have room: at that point the script has used all there was. Never touched, so it is
# never resident. 16 MiB holds the census's list of live objects (8 bytes each) for two million objects;
# kept small, since the script's own failure comes that much earlier (64 MiB moved a corpus case's OOM
# one evaluation batch sooner).
RESERVE_BYTES = 16 << 20
_RESERVE: list[mmap.mmap] = []


def _spare_address_space() -> None:
    """Under an address-space limit (RLIMIT_AS) the agent must not eat the room the script has: one heap
    for all threads, large blocks given back, and a reserve for the checks after an out-of-memory error (see
    ``memory``)."""
    if not under_address_cap():
        return
    one_heap()
    return_large_blocks()
    try:
        _RESERVE.append(mmap.mmap(-1, RESERVE_BYTES, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_NORESERVE", 0)))
    except OSError:  # the cap leaves no room for it: the script comes first
        pass


def _release_reserve() -> None:
    while _RESERVE:
        _RESERVE.pop().close()


def run_target(agent: Agent, target: str, args: list[str], module: bool) -> int:
    """Run the script or module as ``__main__``; its exit code, as plain ``python`` would give."""
    if module:
        sys.argv = [target, *args]
        sys.path[0] = os.getcwd()
    else:
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            _run_script(target)
    except SystemExit as exc:
        return _exit_code(exc.code)
    except BaseException as exc:  # the script's own failure: report it as python would
        if module and isinstance(exc, ImportError) and _user_traceback(exc.__traceback__) is None:
            print(f"tuidebug: error: {exc}", file=sys.stderr)  # runpy found no such module
            return NO_SUCH_MODULE
        _report(agent, exc)
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _run_script(path: str) -> None:
    """Run a script as ``python path`` does: in the real ``__main__`` module, ``__file__`` absolute."""
    path = os.path.abspath(path)
    with io.open_code(path) as source:
        code = compile(source.read(), path, "exec", dont_inherit=True)
    main_module = sys.modules["__main__"]
    main_module.__dict__.clear()
    main_module.__dict__.update(
        __name__="__main__", __doc__=None, __package__=None, __spec__=None, __file__=path, __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path), __builtins__=builtins,
    )
    exec(code, main_module.__dict__)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _report(agent: Agent, exc: BaseException) -> None:
    if is_out_of_memory(exc):
        _release_reserve()
    tb = _user_traceback(exc.__traceback__)
    exc.__traceback__ = tb  # excepthook prints the exception's own traceback, not its argument
    sys.excepthook(type(exc), exc, tb)
    frames = traceback.format_list(traceback.extract_tb(tb))
    summary = f"{type(exc).__name__}: {exc}"
    try:
        model, inputs = agent.observed.model, agent.observed.model_inputs
        evaluating = agent.step > 0 and agent.model is not None and not agent.model.training and \
            agent.failed_module is None and agent.failed_loss is None
        crash = analyse(exc, agent.failed_module, agent.failed_loss, agent.observed.input_size, agent.facts.one_hot,
                        (model, inputs) if model is not None and inputs is not None else None, agent.feeding_loader(),
                        evaluated_after=agent.step if evaluating else None,
                        graphless_after=(agent.step, agent.facts.training_backward_stack) if agent.step > 0 and
                        agent.facts.graphless_backward_grad_off and agent.facts.training_backward_stack else None)
    except Exception as error:  # the analysis must never hide the script's own exception
        crash = None
        agent.event("error", f"could not analyse the exception: {type(error).__name__}: {error}")
    agent.failed_module = agent.failed_loss = None  # they hold the failing step's activations
    agent.send(Event(kind="exception", message=summary, time=time.time(), step=agent.step,
                     details=[line.rstrip() for line in frames] + [summary]))
    if crash is not None and crash.kind == "oom":
        agent.on_out_of_memory(user_frames(tb))
    if crash is not None:
        agent.crash = crash
        agent.send(Event(kind="crash", message=f"{crash.kind} {crash.cause}", time=time.time(), step=agent.step,
                         details=crash.lines()))
    exc.__traceback__ = None


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """Drop the leading frames of tuidebug and runpy, so the traceback starts in the script."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES):
        tb = tb.tb_next
    return tb
