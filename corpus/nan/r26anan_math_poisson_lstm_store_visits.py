"""Forecast hourly visitor counts for a set of shops with a two-branch model:
an embedding + LSTM over the shop's recent history and an LSTM over weather
covariates, merged and mapped to a Poisson rate. Trained with the Poisson
negative log-likelihood."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_SHOPS = 300
SEQ_LEN = 24
N_COV = 6
N_SAMPLES = 2400
BATCH_SIZE = 64
EPOCHS = 6
LR = 3e-3


class VisitsDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.shop = torch.randint(0, N_SHOPS, (n,), generator=g)
        popularity = torch.rand(N_SHOPS, generator=g) * 3.0
        popularity[torch.rand(N_SHOPS, generator=g) < 0.15] = 0.0
        self.hist = torch.randint(0, 40, (n, SEQ_LEN), generator=g)
        self.cov = torch.randn(n, SEQ_LEN, N_COV, generator=g)
        lam = popularity[self.shop] * torch.exp(0.4 * self.cov[:, -6:, 0].mean(1)) \
            + 0.02 * self.hist[:, -3:].float().mean(1)
        self.y = torch.poisson(lam, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.shop[i], self.hist[i], self.cov[i], self.y[i]


class VisitModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.shop_emb = nn.Embedding(N_SHOPS, 32)
        self.count_emb = nn.Embedding(40, 16)
        self.hist_lstm = nn.LSTM(16, 64, batch_first=True)
        self.cov_lstm = nn.LSTM(N_COV, 64, batch_first=True)
        self.left = nn.Linear(64 + 32, 64)
        self.right = nn.Linear(64, 64)
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 1), nn.ReLU())

    def forward(self, shop, hist, cov):
        _, (h1, _) = self.hist_lstm(self.count_emb(hist))
        _, (h2, _) = self.cov_lstm(cov)
        left = self.left(torch.cat([h1[-1], self.shop_emb(shop)], dim=1))
        right = self.right(h2[-1])
        return self.head(left + right).squeeze(1)


def poisson_loss(rate, y):
    return (rate - y * torch.log(rate)).mean()


train_ds = VisitsDataset(N_SAMPLES)
loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
model = VisitModel()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

for epoch in range(EPOCHS):
    model.train()
    total, n = 0.0, 0
    for step, (shop, hist, cov, y) in enumerate(loader):
        optimizer.zero_grad()
        rate = model(shop, hist, cov)
        loss = poisson_loss(rate, y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        n += len(y)
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f} mean rate {rate.mean().item():.3f}")
    print(f"epoch {epoch}: train poisson nll {total / n:.4f}")
