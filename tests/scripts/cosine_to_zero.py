"""A classifier whose cosine schedule ends at a rate of 0 with the script, then evaluated in inference
mode on other data: after the end, a probe must train its copy at the rate the run last used, on a
training batch, not at 0 on an inference tensor."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
train = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
test = DataLoader(TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long)), batch_size=64)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
epochs = 3
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
criterion = nn.CrossEntropyLoss()
for epoch in range(epochs):
    for xb, yb in train:
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.3g}")
model.eval()
with torch.inference_mode():
    for xb, yb in test:
        print(f"test loss {criterion(model(xb), yb).item():.4f}")
