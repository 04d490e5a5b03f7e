"""A classifier trained with the agent reading as it would on a GPU, where each read of a tensor's value
is a device sync: prints how many reads the agent made at each step on the training thread.

Its loss gets probabilities made by hand (rows that sum to 1, no Softmax node) and is scaled to 0, so
every gradient is all zero: both are found only from values the agent reads, so the count covers the
checks too.
"""

import sys
import threading

import torch
from torch import nn

import tuidebug.agent.core
import tuidebug.agent.facts

tuidebug.agent.core.blocks_host = lambda tensor: True
tuidebug.agent.facts.blocks_host = lambda tensor: True

reads = [0]


def counted(read):
    def wrapper(tensor, *args, **kwargs):
        # the training thread's: the agent's writer thread reads a GPU step's values once its event is done; a
        # TorchFunctionMode of tuidebug's passing a read through (probes/watch.py) is the same read, not another
        caller = sys._getframe(1).f_code.co_filename
        if threading.current_thread() is threading.main_thread() and "/tuidebug/" in caller \
                and not caller.endswith("watch.py"):
            reads[0] += 1
        return read(tensor, *args, **kwargs)
    return wrapper


for name in ("item", "tolist", "cpu", "numpy", "__float__", "__bool__", "__int__"):
    setattr(torch.Tensor, name, counted(getattr(torch.Tensor, name)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 4)

    def forward(self, x):
        exp = self.body(x).exp()
        return exp / exp.sum(dim=1, keepdim=True)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(256, 8), torch.randint(0, 4, (256,))
for step in range(1, int(sys.argv[1]) + 1):
    rows = slice(step % 8 * 32, step % 8 * 32 + 32)
    loss = nn.functional.cross_entropy(model(x[rows]), y[rows]) * 0.0
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} agent reads {reads[0]}", flush=True)
    reads[0] = 0
