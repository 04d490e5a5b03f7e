"""Change detection between two co-registered image tiles (before / after), per-pixel
two-class segmentation with a small fully convolutional network.

To fit larger tiles in memory the network and the inputs are converted to half precision
(HalfTensor) and trained with Adam.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ChangePairs(Dataset):
    """Random textures; in the 'after' tile a few rectangles change brightness. Label = changed pixels."""

    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.before = torch.rand(n, 3, size, size, generator=g)
        self.after = self.before + 0.05 * torch.randn(n, 3, size, size, generator=g)
        self.mask = torch.zeros(n, size, size, dtype=torch.long)
        for i in range(n):
            for _ in range(2):
                r, c = torch.randint(0, size - 8, (2,), generator=g).tolist()
                h, w = torch.randint(4, 9, (2,), generator=g).tolist()
                self.after[i, :, r:r + h, c:c + w] += 0.8
                self.mask[i, r:r + h, c:c + w] = 1

    def __len__(self):
        return len(self.mask)

    def __getitem__(self, i):
        return {"A": self.before[i], "B": self.after[i], "L": self.mask[i]}


class SmallChangeNet(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(6, ch, 3, padding=1), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
        )
        self.classifier = nn.Conv2d(ch, 2, 1)

    def forward(self, a, b):
        return self.classifier(self.encoder(torch.cat([a, b], dim=1)))


class CDTrainer:
    def __init__(self, lr=1e-3, batch_size=16, epochs=2):
        torch.manual_seed(0)
        self.loader = DataLoader(ChangePairs(128), batch_size=batch_size, shuffle=True)
        self.net = SmallChangeNet().half()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()
        self.epochs = epochs

    def train_epoch(self, epoch):
        self.net.train()
        for i, batch in enumerate(self.loader):
            a = batch["A"].half()
            b = batch["B"].half()
            label = batch["L"]
            pred = self.net(a, b)
            loss = self.criterion(pred, label)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            changed = label == 1
            recall = (pred.argmax(1)[changed] == 1).float().mean().item()
            if i % 5 == 0:
                print(f"epoch {epoch} iter {i:2d} G_loss {loss.item():.4f} change_recall {recall:.3f}")

    def train(self):
        for epoch in range(self.epochs):
            self.train_epoch(epoch)


if __name__ == "__main__":
    CDTrainer().train()
