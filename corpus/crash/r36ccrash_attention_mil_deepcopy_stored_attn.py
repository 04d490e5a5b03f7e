"""Attention-based MIL classifier on synthetic bags of instance features.

Keeps the attention weights of the last forward for plotting and keeps a copy
of the best model (by training loss) for the final test.
"""
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
KEY = torch.randn(32)


class BagDataset(Dataset):
    def __init__(self, n_bags, bag_size=16, dim=32):
        self.x = torch.randn(n_bags, bag_size, dim)
        self.y = torch.randint(0, 2, (n_bags,))
        for i in range(n_bags):
            if self.y[i] == 1:
                k = torch.randint(1, 4, (1,)).item()
                idx = torch.randperm(bag_size)[:k]
                self.x[i, idx] += 2.0 * KEY[:dim]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class AttentionMIL(nn.Module):
    def __init__(self, dim=32, hidden=64):
        super().__init__()
        self.feature = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.attention = nn.Sequential(nn.Linear(hidden, 32), nn.Tanh(), nn.Linear(32, 1))
        self.classifier = nn.Linear(hidden, 2)
        self.attn_weights = None

    def forward(self, x):
        h = self.feature(x)
        a = self.attention(h).squeeze(-1)
        a = F.softmax(a, dim=1)
        self.attn_weights = a
        z = torch.bmm(a.unsqueeze(1), h).squeeze(1)
        return self.classifier(z)


train_ds = BagDataset(512)
test_ds = BagDataset(128)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
test_loader = DataLoader(test_ds, batch_size=64)

model = AttentionMIL()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

best_loss = float("inf")
best_model = None
for epoch in range(10):
    model.train()
    running = 0.0
    for step, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 8 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    epoch_loss = running / len(train_loader)
    print(f"epoch {epoch} mean train loss {epoch_loss:.4f}")
    if epoch_loss < best_loss:
        best_loss = epoch_loss
        best_model = copy.deepcopy(model)
        print(f"  new best model at epoch {epoch}")

best_model.eval()
correct = 0
with torch.no_grad():
    for x, y in test_loader:
        pred = best_model(x).argmax(1)
        correct += (pred == y).sum().item()
print(f"test accuracy {correct / len(test_ds):.3f}")
print("attention of first test bag:", best_model.attn_weights[0])
