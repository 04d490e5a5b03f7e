"""Predict the distribution of 1-5 star votes each product gets from its description
embedding (label distribution learning), trained with a KL-divergence objective."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader, random_split

torch.manual_seed(0)

N_PRODUCTS, EMB_DIM, N_STARS = 3000, 48, 5


class VoteDistributionDataset(Dataset):
    def __init__(self, n):
        self.emb = torch.randn(n, EMB_DIM)
        proj = torch.randn(EMB_DIM, N_STARS) / EMB_DIM ** 0.5
        probs = torch.softmax(2.0 * self.emb @ proj, dim=1)
        n_votes = torch.randint(3, 40, (n,))
        counts = torch.stack([torch.bincount(torch.multinomial(probs[i], int(n_votes[i]), replacement=True), minlength=N_STARS) for i in range(n)])
        self.dist = counts.float() / counts.sum(1, keepdim=True)

    def __len__(self):
        return len(self.emb)

    def __getitem__(self, i):
        return self.emb[i], self.dist[i]


class VoteNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(EMB_DIM, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Linear(64, N_STARS)

    def forward(self, x):
        return torch.softmax(self.head(self.body(x)), dim=1)


def kullback_leibler(y_pred, y_true):
    kl = y_true * torch.log(y_true / y_pred)
    return kl.sum(dim=1).mean()


dataset = VoteDistributionDataset(N_PRODUCTS)
print(f"products {len(dataset)}, share of zero-vote star levels: {(dataset.dist == 0).float().mean():.2f}")
train_set, val_set = random_split(dataset, [2500, 500])
train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
val_loader = DataLoader(val_set, batch_size=256)

model = VoteNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(5):
    model.train()
    total = 0.0
    for step, (emb, dist) in enumerate(train_loader):
        pred = model(emb)
        loss = kullback_leibler(pred, dist)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} kl {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        mae = sum((model(e) - d).abs().sum(1).sum().item() for e, d in val_loader) / len(val_set)
    print(f"epoch {epoch}: train kl {total / len(train_loader):.4f}  val L1 between distributions {mae:.4f}")
