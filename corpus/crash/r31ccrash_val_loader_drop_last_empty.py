"""Image classification benchmark: train a small CNN and report validation loss / rows.

Both loaders come from one factory so that train and validation batches are built the
same way (fixed-size batches keep the per-step throughput numbers comparable).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 10
BATCH_SIZE = 256


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    centers = torch.randn(NUM_CLASSES, 3, 16, 16, generator=torch.Generator().manual_seed(99))
    x = centers[y] + 3.0 * torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(x, y)


def create_dataloader(dataset, batch_size, shuffle, drop_last=True):
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, NUM_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class Runner:
    def __init__(self, model, train_loader, val_loader):
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.loss_fn = nn.CrossEntropyLoss()
        self.global_step = 0

    def _train_epoch(self, epoch):
        self.model.train()
        t0 = time.time()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.global_step += 1
            if self.global_step % 10 == 0:
                print(f"epoch {epoch} step {self.global_step}: train loss {loss.item():.4f}")
        return len(self.train_loader) * BATCH_SIZE / (time.time() - t0)

    def _validate_epoch(self):
        self.model.eval()
        total_loss = torch.tensor(0.0)
        num_rows = 0
        correct = 0
        with torch.no_grad():
            for x, y in self.val_loader:
                out = self.model(x)
                total_loss += self.loss_fn(out, y) * x.size(0)
                correct += (out.argmax(1) == y).sum().item()
                num_rows += x.size(0)
        return {"validation/loss": total_loss.item() / num_rows, "validation/acc": correct / num_rows}

    def run(self, epochs):
        for epoch in range(epochs):
            rows_per_s = self._train_epoch(epoch)
            metrics = self._validate_epoch()
            print(f"epoch {epoch}: {rows_per_s:.0f} rows/s  val loss {metrics['validation/loss']:.4f}  "
                  f"val acc {metrics['validation/acc']:.3f}")


train_ds = make_split(7680, seed=1)
val_ds = make_split(200, seed=2)
train_loader = create_dataloader(train_ds, BATCH_SIZE, shuffle=True)
val_loader = create_dataloader(val_ds, BATCH_SIZE, shuffle=False)

runner = Runner(SmallCNN(), train_loader, val_loader)
runner.run(epochs=3)
