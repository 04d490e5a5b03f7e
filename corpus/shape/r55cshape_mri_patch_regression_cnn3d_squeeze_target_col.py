"""3D CNN regression on synthetic MRI-like patches: predict the radius (in voxels)
of a bright lesion in a 16^3 volume, GaNDLF-style subject dicts and a validation pass."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

PATCH = 16


def make_subject(gen):
    radius = 2.0 + 4.0 * torch.rand(1, generator=gen).item()
    c = 4 + 8 * torch.rand(3, generator=gen)
    zz, yy, xx = torch.meshgrid(torch.arange(PATCH), torch.arange(PATCH), torch.arange(PATCH), indexing="ij")
    d = ((zz - c[0]) ** 2 + (yy - c[1]) ** 2 + (xx - c[2]) ** 2).sqrt()
    img = torch.sigmoid((radius - d) * 2.0) + 0.1 * torch.randn(PATCH, PATCH, PATCH, generator=gen)
    return img.unsqueeze(0), radius


class PatchDataset(Dataset):
    def __init__(self, n, seed):
        gen = torch.Generator().manual_seed(seed)
        self.subjects = [make_subject(gen) for _ in range(n)]

    def __len__(self):
        return len(self.subjects)

    def __getitem__(self, idx):
        img, radius = self.subjects[idx]
        return {"image": img, "value_0": torch.tensor([radius], dtype=torch.float32)}


class VGG3D(nn.Module):
    def __init__(self, n_channels=1, base=8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv3d(n_channels, base, 3, padding=1), nn.BatchNorm3d(base), nn.ReLU(),
            nn.MaxPool3d(2),
            nn.Conv3d(base, base * 2, 3, padding=1), nn.BatchNorm3d(base * 2), nn.ReLU(),
            nn.MaxPool3d(2),
            nn.Conv3d(base * 2, base * 2, 3, padding=1), nn.BatchNorm3d(base * 2), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1),
        )
        self.regressor = nn.Sequential(nn.Flatten(), nn.Linear(base * 2, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.regressor(self.features(x)).squeeze()


train_loader = DataLoader(PatchDataset(160, seed=1), batch_size=8, shuffle=True)
val_loader = DataLoader(PatchDataset(48, seed=2), batch_size=8)

model = VGG3D()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.MSELoss()

for epoch in range(6):
    model.train()
    running = 0.0
    for step, subject in enumerate(train_loader):
        image = subject["image"]
        label = subject["value_0"]
        output = model(image)
        loss = loss_fn(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    model.eval()
    abs_err = 0.0
    count = 0
    with torch.no_grad():
        for subject in val_loader:
            pred = model(subject["image"]).view(-1)
            abs_err += (pred - subject["value_0"].view(-1)).abs().sum().item()
            count += pred.numel()
    print("epoch %d train mse %.4f val MAE %.3f voxels" % (epoch, running / len(train_loader), abs_err / count))
