"""A slow loop whose model keeps every batch's predictions in a metric that nothing resets: a pass over
the data takes about 4 s, so a short diagnose window sees too few passes to decide."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MeanError(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.preds = []

    def update(self, preds) -> None:
        self.preds.append(preds.detach())


class Scored(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 1)
        self.metric = MeanError()

    def forward(self, x):
        out = self.net(x)
        self.metric.update(out)
        return out


torch.manual_seed(0)
model = Scored()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs = torch.randn(128, 8)
data = TensorDataset(inputs, inputs.sum(1, keepdim=True))
for epoch in range(40):
    for x, y in DataLoader(data, batch_size=32):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(1.0)
    print(f"epoch {epoch}: {len(model.metric.preds)} predictions kept")
