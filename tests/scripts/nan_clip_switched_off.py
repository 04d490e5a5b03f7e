"""An RNN regressor that can clip its gradients (--clip), left at its default of 0: a glitched
target in a rare batch makes a gradient a thousand times the usual norm, and the next loss is NaN."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--clip", type=float, default=0.0)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(1024, 20, 4)
y = x[:, -3:, 0].sum(dim=1, keepdim=True)
y[[700, 901]] = 3.0e4
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(3))
rnn, head = nn.RNN(4, 32, nonlinearity="relu", batch_first=True), nn.Linear(32, 1)
model = nn.ModuleDict({"rnn": rnn, "head": head})
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
for epoch in range(4):
    for xb, yb in loader:
        out, _ = rnn(xb)
        loss = nn.functional.mse_loss(head(out[:, -1]), yb)
        optimizer.zero_grad()
        loss.backward()
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
