"""Customer-churn classifier on tabular account data: an MLP trained with AdamW and a one-cycle
learning-rate schedule over all iterations (the schedule is defined per batch).
"""
import time
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

FEATURES = ["tenure_months", "monthly_charge", "support_calls", "data_gb", "late_payments",
            "contract_months", "n_products", "discount_pct", "app_logins", "outage_hours"]


class ChurnDataset(Dataset):
    def __init__(self, n, seed, mean=None, std=None):
        g = torch.Generator().manual_seed(seed)
        x = torch.stack([
            torch.randint(1, 72, (n,), generator=g).float(),
            20 + 80 * torch.rand(n, generator=g),
            torch.poisson(torch.full((n,), 1.5), generator=g),
            torch.rand(n, generator=g) * 50,
            torch.poisson(torch.full((n,), 0.7), generator=g),
            torch.tensor([1., 12., 24.])[torch.randint(0, 3, (n,), generator=g)],
            torch.randint(1, 5, (n,), generator=g).float(),
            torch.rand(n, generator=g) * 30,
            torch.poisson(torch.full((n,), 12.0), generator=g),
            torch.rand(n, generator=g) * 10,
        ], dim=1)
        logit = (-0.06 * x[:, 0] + 0.03 * x[:, 1] + 0.6 * x[:, 2] + 0.9 * x[:, 4]
                 - 0.08 * x[:, 5] - 0.4 * x[:, 6] - 0.08 * x[:, 8] + 0.15 * x[:, 9] + 0.5)
        self.y = (logit + 0.5 * torch.randn(n, generator=g) > 0).long()
        self.mean = x.mean(0) if mean is None else mean
        self.std = x.std(0) if std is None else std
        self.x = (x - self.mean) / self.std

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class ChurnMLP(nn.Module):
    def __init__(self, n_in=len(FEATURES), hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, 2),
        )

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader, criterion):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            total_loss += criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            n += len(y)
    model.train()
    return total_loss / n, correct / n


def main():
    train_set = ChurnDataset(6400, seed=1)
    val_set = ChurnDataset(1600, seed=2, mean=train_set.mean, std=train_set.std)
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=512)
    print(f"churn rate {train_set.y.float().mean():.3f}")

    epochs = 4
    model = ChurnMLP()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2,
                                                    total_steps=epochs * len(train_loader))

    start = time.time()
    step = 0
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            scheduler.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")
            step += 1
        val_loss, val_acc = evaluate(model, val_loader, criterion)
        print(f"epoch {epoch} val_loss {val_loss:.4f} val_acc {val_acc:.3f} ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
