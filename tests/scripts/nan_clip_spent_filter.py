"""An RNN regressor that clips its trainable parameters' gradients: the parameters are kept as a
filter object, which building the optimizer uses up, so the clip is given none. A glitched target
in a rare batch makes a gradient a thousand times the usual norm, and the next loss is NaN."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(1024, 20, 4)
y = x[:, -3:, 0].sum(dim=1, keepdim=True)
y[[700, 901]] = 3.0e4
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(3))
rnn, head = nn.RNN(4, 32, nonlinearity="relu", batch_first=True), nn.Linear(32, 1)
model = nn.ModuleDict({"rnn": rnn, "head": head})
trainable = filter(lambda p: p.requires_grad, model.parameters())
optimizer = torch.optim.SGD(trainable, lr=0.02, momentum=0.9)
max_grad_norm = 1.0
for epoch in range(4):
    for xb, yb in loader:
        out, _ = rnn(xb)
        loss = nn.functional.mse_loss(head(out[:, -1]), yb)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(trainable, max_grad_norm)
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
