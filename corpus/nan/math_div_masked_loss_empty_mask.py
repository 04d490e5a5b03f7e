"""Denoising autoencoder trained with a foreground-masked reconstruction loss.

Each 16x16 image may contain one bright object on a dark background; the loss is only
computed on the object's pixels (given by its segmentation mask), averaged per image.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(12)


class ObjectImages(Dataset):
    def __init__(self, n, size=16, p_empty=0.01):
        self.items = []
        for _ in range(n):
            img = torch.zeros(1, size, size)
            mask = torch.zeros(1, size, size)
            if torch.rand(()) > p_empty:
                h, w = torch.randint(3, 9, (2,)).tolist()
                r = torch.randint(0, size - h, ()).item()
                c = torch.randint(0, size - w, ()).item()
                img[:, r:r + h, c:c + w] = 0.5 + 0.5 * torch.rand(())
                mask[:, r:r + h, c:c + w] = 1.0
            noisy = img + 0.3 * torch.randn_like(img)
            self.items.append({"image": img, "noisy": noisy, "mask": mask})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class DenoisingAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 1, 3, padding=1),
        )

    def forward(self, x):
        return self.dec(self.enc(x))


class Trainer:
    def __init__(self, model, loader, lr=2e-3):
        self.model = model
        self.loader = loader
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self.step = 0

    def compute_loss(self, batch):
        pred = self.model(batch["noisy"])
        masks = batch["mask"]
        loss = F.mse_loss(pred, batch["image"], reduction="none") * masks
        loss = loss.sum([1, 2, 3]) / masks.sum([1, 2, 3])
        return loss.mean()

    def train_epoch(self, epoch):
        total = 0.0
        for batch in self.loader:
            loss = self.compute_loss(batch)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            total += loss.item()
            self.step += 1
            if self.step % 10 == 0:
                print(f"[epoch {epoch} step {self.step}] masked mse {loss.item():.5f}")
        print(f"epoch {epoch} done: mean masked mse {total / len(self.loader):.5f}")


if __name__ == "__main__":
    data = ObjectImages(800)
    loader = DataLoader(data, batch_size=16, shuffle=True)
    trainer = Trainer(DenoisingAE(), loader)
    for epoch in range(2):
        trainer.train_epoch(epoch)
