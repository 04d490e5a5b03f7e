"""Click-through / conversion classifier on tabular features with a class-weighted binary
cross-entropy written by hand (positives are rare, so they get a larger weight)."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split

torch.manual_seed(7)

N_SAMPLES = 6000
N_FEATURES = 24
POS_WEIGHT = 6.0
NEG_WEIGHT = 1.0
EPOCHS = 8
LR = 3e-3


class ConversionData(Dataset):
    def __init__(self, n, d):
        self.x = torch.randn(n, d)
        self.x[:, :4] *= 3.0
        score = 2.5 * self.x[:, 0] - 1.8 * self.x[:, 1] + 1.2 * self.x[:, 2] * self.x[:, 3] - 9.0
        self.y = (score + 0.5 * torch.randn(n) > 0).float()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class WeightedBCELoss(nn.Module):
    def __init__(self, pos_weight, neg_weight):
        super().__init__()
        self.pos_weight = pos_weight
        self.neg_weight = neg_weight

    def forward(self, pred, target):
        loss = - self.pos_weight * target * torch.log(pred) \
               - self.neg_weight * (1 - target) * torch.log(1 - pred)
        return loss.mean()


class Classifier(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 1),
        )

    def forward(self, x):
        return torch.sigmoid(self.net(x)).squeeze(-1)


dataset = ConversionData(N_SAMPLES, N_FEATURES)
train_set, val_set = random_split(dataset, [5000, 1000], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
val_loader = DataLoader(val_set, batch_size=500)
print(f"positive rate: {dataset.y.mean().item():.3f}")

model = Classifier(N_FEATURES)
criterion = WeightedBCELoss(POS_WEIGHT, NEG_WEIGHT)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for x, y in train_loader:
        pred = model(x)
        loss = criterion(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)

    model.eval()
    tp = fp = fn = correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            p = model(x) > 0.5
            correct += (p == y.bool()).sum().item()
            tp += (p & y.bool()).sum().item()
            fp += (p & ~y.bool()).sum().item()
            fn += (~p & y.bool()).sum().item()
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    print(f"epoch {epoch + 1}: train loss {total / len(train_set):.4f}  "
          f"val acc {correct / len(val_set):.4f}  val f1 {f1:.4f}")
