"""Weekly unit-sales regressor for a retail chain, trained in half precision to save memory:
12 standardised store/promo features -> MLP -> units sold next week. The model and each batch
are converted to float16 with the same helper."""
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


def make_store_weeks(n=6000):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 12, generator=g)
    w = torch.tensor([0.6, 0.4, -0.3, 0.25, 0.2, 0.0, 0.15, -0.1, 0.05, 0.3, 0.0, -0.2])
    log_units = 8.6 + x @ w + 0.1 * torch.randn(n, generator=g)
    units = torch.exp(log_units).round()
    return x, units


def to_half(*tensors):
    return [t.half() for t in tensors]


x, units = make_store_weeks()
print(f"units sold: min {units.min():.0f} median {units.median():.0f} max {units.max():.0f}")
train = TensorDataset(x[:5000], units[:5000])
val = TensorDataset(x[5000:], units[5000:])
train_loader = DataLoader(train, batch_size=64, shuffle=True)
val_loader = DataLoader(val, batch_size=500)

model = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)).half()
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=3e-7, momentum=0.9)

for epoch in range(3):
    model.train()
    total = 0.0
    for step, (xb, yb) in enumerate(train_loader):
        xb, yb = to_half(xb, yb)
        pred = model(xb).squeeze(-1)
        loss = criterion(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 15 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        xb, yb = val[:]
        pred = model(xb.half()).squeeze(-1).float()
        mape = ((pred - yb).abs() / yb).mean().item()
    print(f"epoch {epoch} train_loss {total / len(train_loader):.4f} val_MAPE {mape:.3f}")
