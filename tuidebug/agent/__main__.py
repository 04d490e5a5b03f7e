"""``python -m tuidebug.agent``: what torchrun starts in every worker of a ``tuidebug --nproc-per-node``
job (the configuration comes in the environment, as for a single process; see runner.py)."""

from tuidebug.agent.runner import main

main()
