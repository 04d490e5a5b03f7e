"""Exploding gradients: an RNN regressor whose gradient spikes on a rare batch.

Training is healthy for dozens of steps. A ReLU recurrence; a handful of sequences carry glitched targets (finite,
but a thousand times too large); the batch that holds one produces a gradient a thousand times the
usual norm, one unclipped SGD step wrecks the weights, and the next loss is NaN. Clipping the
gradient norm keeps the run finite.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
SEQ, FEATURES, HIDDEN = 20, 4, 32
x = torch.randn(1024, SEQ, FEATURES)
y = x[:, -3:, 0].sum(dim=1, keepdim=True)
y[[700, 901]] = 3.0e4  # glitched targets
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                    generator=torch.Generator().manual_seed(3))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(FEATURES, HIDDEN, nonlinearity="relu", batch_first=True)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, seq):
        out, _ = self.rnn(seq)
        return self.head(out[:, -1])


model = Model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
for epoch in range(4):
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
