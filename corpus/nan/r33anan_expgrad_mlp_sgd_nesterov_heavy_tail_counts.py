"""MLP regressor for web-session logs: 36 behavioural features (dwell times, scroll depth,
click rates) plus 4 raw count features (requests, pages, retries, errors) -> standardised
log session length. Same recipe as the Keras mnist_mlp example: 512-512 ReLU with dropout,
SGD with Nesterov momentum."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(1)

N_DENSE, N_COUNT = 36, 4


class SessionLogs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        dense = torch.randn(n, N_DENSE, generator=g)
        counts = torch.exp(1.2 + 0.9 * torch.randn(n, N_COUNT, generator=g)).round()
        bots = torch.rand(n, generator=g) < 0.0005
        counts[bots] = counts[bots] * 150
        w = torch.randn(N_DENSE, generator=torch.Generator().manual_seed(7)) / 6
        y = torch.tanh(dense @ w) + 0.2 * torch.log1p(counts).sum(1) + 0.3 * torch.randn(n, generator=g)
        self.y = ((y - y.mean()) / y.std())[:, None]
        self.x = torch.cat([dense, counts], dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


train_loader = DataLoader(SessionLogs(12800, 1), batch_size=64, shuffle=True)
val_loader = DataLoader(SessionLogs(2000, 2), batch_size=500)

model = nn.Sequential(
    nn.Linear(N_DENSE + N_COUNT, 512), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(512, 1),
)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0 / (1.0 + 1e-6 * it))

step = 0
for epoch in range(2):
    model.train()
    total, seen = 0.0, 0
    for x, y in train_loader:
        out = model(x)
        loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        total += loss.item() * len(y)
        seen += len(y)
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        step += 1
    model.eval()
    sq = 0.0
    with torch.no_grad():
        for x, y in val_loader:
            sq += ((model(x) - y) ** 2).sum().item()
    print(f"epoch {epoch} train mse {total / seen:.4f} val mse {sq / 2000:.4f}")
