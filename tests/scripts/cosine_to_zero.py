"""A classifier whose cosine schedule ends at a rate of 0 with the script; then features are extracted
with grad on (batches of 64, no backward) and it is evaluated in inference mode: after the end, a probe
must train its copy at the rate the run last used, on a training batch with that batch's own targets (batches sliced by hand: the copy pairs the inputs and
targets the hooks saw)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
test = DataLoader(TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long)), batch_size=64)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
epochs = 3
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
criterion = nn.CrossEntropyLoss()
for epoch in range(epochs):
    order = torch.randperm(len(x))
    for i in range(0, len(x), 32):
        xb, yb = x[order[i:i + 32]], y[order[i:i + 32]]
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.3g}")
features = torch.cat([model(xb) for xb, _ in DataLoader(TensorDataset(x, y), batch_size=64)])
print(f"features {tuple(features.shape)}")
model.eval()
with torch.inference_mode():
    for xb, yb in test:
        print(f"test loss {criterion(model(xb), yb).item():.4f}")
