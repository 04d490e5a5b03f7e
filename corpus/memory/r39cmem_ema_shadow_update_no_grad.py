"""Text-classification MLP over bag-of-words features with an exponential moving
average (EMA) of the weights; the EMA weights are used for evaluation each epoch
(synthetic sparse documents stand in for the real corpus)."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

VOCAB = 10000
N_CLASSES = 8


class BowDataset(Dataset):
    def __init__(self, n, seed):
        topic_words = torch.randint(0, VOCAB, (N_CLASSES, 40), generator=torch.Generator().manual_seed(0))
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.docs = []
        for y in self.labels.tolist():
            words = torch.cat([topic_words[y][torch.randint(0, 40, (12,), generator=g)],
                               torch.randint(0, VOCAB, (30,), generator=g)])
            self.docs.append(words)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.zeros(VOCAB)
        x[self.docs[i]] = 1.0
        return x, self.labels[i]


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(VOCAB, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, N_CLASSES))

    def forward(self, x):
        return self.net(x)


class EMA:
    def __init__(self, model, decay):
        self.model = model
        self.decay = decay
        self.shadow = {}
        self.backup = {}

    def register(self):
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                self.shadow[name] = param.data.clone()

    def update(self):
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                new_average = (1.0 - self.decay) * param + self.decay * self.shadow[name]
                self.shadow[name] = new_average

    def apply_shadow(self):
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                self.backup[name] = param.data
                param.data = self.shadow[name].data

    def restore(self):
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                param.data = self.backup[name]
        self.backup = {}


train_loader = DataLoader(BowDataset(3200, seed=1), batch_size=32, shuffle=True)
val_loader = DataLoader(BowDataset(640, seed=2), batch_size=128)

model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
ema = EMA(model, decay=0.99)
ema.register()

for epoch in range(3):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        ema.update()
        total += loss.item()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    ema.apply_shadow()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ema.restore()
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} ema val acc {correct / len(val_loader.dataset):.3f}")
