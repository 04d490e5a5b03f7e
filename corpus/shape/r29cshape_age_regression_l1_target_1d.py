"""Apparent-age regression from 32x32 grey face crops with a small CNN.

Ages are standardised for training; the model is trained with an L1 loss and
evaluated by the mean absolute error in years on a held-out split.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

AGE_MEAN, AGE_STD = 40.0, 15.0


class FaceAges(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ages = (AGE_MEAN + AGE_STD * torch.randn(n, generator=g)).clamp(5, 90)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, 32), torch.linspace(-1, 1, 32), indexing="ij")
        wrinkles = torch.sin(12 * yy)[None] * (self.ages[:, None, None] - 5) / 85
        face = torch.exp(-(xx ** 2 + yy ** 2) * 2)[None]
        self.images = (face + 0.8 * wrinkles * face + 0.3 * torch.randn(n, 32, 32, generator=g)).unsqueeze(1)

    def __len__(self):
        return len(self.ages)

    def __getitem__(self, idx):
        return self.images[idx], (self.ages[idx] - AGE_MEAN) / AGE_STD


class AgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
        )
        self.regressor = nn.Sequential(nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.regressor(self.features(x))


train_loader = DataLoader(FaceAges(2048, 1), batch_size=64, shuffle=True)
val_loader = DataLoader(FaceAges(512, 2), batch_size=128)
model = AgeNet()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.L1Loss()

for epoch in range(1, 7):
    model.train()
    total = 0.0
    for images, ages in train_loader:
        optimizer.zero_grad()
        preds = model(images)
        loss = criterion(preds, ages)
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    abs_err = 0.0
    with torch.no_grad():
        for images, ages in val_loader:
            preds = model(images).view(-1)
            abs_err += ((preds - ages).abs() * AGE_STD).sum().item()
    print(f"epoch {epoch}: train L1 {total / len(train_loader):.4f}  val MAE {abs_err / len(val_loader.dataset):.2f} years")
