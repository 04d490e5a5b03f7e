"""Sensor-event classifier trained with a per-class sigmoid (binary cross-entropy) loss.

Five event types, the last one rare. Each sample is a 24-dim feature vector whose mean
shifts along a class-specific direction. Batches come from the dataset as dicts.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 5
CLASS_FREQ = [0.30, 0.28, 0.20, 0.16, 0.06]


class EventDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.multinomial(torch.tensor(CLASS_FREQ), n, replacement=True, generator=g)
        centers = 2.0 * torch.randn(NUM_CLASSES, 24, generator=g)
        self.features = centers[self.labels] + torch.randn(n, 24, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"features": self.features[i], "label": self.labels[i]}


class EventNet(nn.Module):
    def __init__(self, in_dim=24, hidden=64, num_classes=NUM_CLASSES):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.cls_head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.cls_head(self.body(x))


class Trainer:
    def __init__(self, model, train_loader, lr=1e-2, epochs=4):
        self.model = model
        self.train_loader = train_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.epochs = epochs
        self.global_step = 0

    def loss_fn(self, cls_score, labels):
        prob = cls_score.sigmoid()
        y = F.one_hot(labels).float()
        pos_xse = -torch.log(prob.clamp(min=1e-6)) * y
        neg_xse = -torch.log((1 - prob).clamp(min=1e-6)) * (1 - y)
        return (pos_xse + neg_xse).sum(dim=1).mean()

    def train_step(self, batch):
        self.model.train()
        cls_score = self.model(batch["features"])
        loss = self.loss_fn(cls_score, batch["label"])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.global_step += 1
        acc = (cls_score.argmax(1) == batch["label"]).float().mean().item()
        return loss.item(), acc

    def fit(self):
        for epoch in range(self.epochs):
            for batch in self.train_loader:
                loss, acc = self.train_step(batch)
                print(f"epoch {epoch} step {self.global_step} loss {loss:.4f} acc {acc:.3f}")


if __name__ == "__main__":
    torch.manual_seed(3)
    train_loader = DataLoader(EventDataset(2000, seed=3), batch_size=32, shuffle=True)
    trainer = Trainer(EventNet(), train_loader)
    trainer.fit()
