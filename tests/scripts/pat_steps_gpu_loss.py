"""pat_steps.py with its losses read as a GPU's would be: the agent may not read them at backward (a
device sync) and checks them with the gradients before the optimizer step, in one read."""

import runpy
import sys

import tuidebug.agent.core

tuidebug.agent.core.blocks_host = lambda tensor: True
sys.argv[0] = sys.argv[0].replace("pat_steps_gpu_loss.py", "pat_steps.py")
runpy.run_path(sys.argv[0], run_name="__main__")
