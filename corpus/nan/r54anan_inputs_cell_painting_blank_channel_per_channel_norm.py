"""Phenotype classifier for single-cell crops from a 4-channel fluorescence screen.

The backbone was set up for 5-channel Cell Painting crops, so each 4-channel crop gets an
extra empty channel, then every crop is normalised per channel before it goes to the CNN.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_CELLS = 768
CROP = 24
N_CLASSES = 3
IN_CHANNELS = 5


def make_crops(n):
    yy, xx = np.mgrid[0:CROP, 0:CROP]
    labels = np.random.randint(0, N_CLASSES, size=n)
    cy, cx = np.random.uniform(10, 14, size=(2, n, 1, 1))
    r = np.random.uniform(4, 6, size=(n, 1, 1)) * (1.0 + 0.35 * labels[:, None, None])
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r ** 2))
    lab = labels[:, None, None]
    noise = np.random.gamma(2.0, 10.0, size=(4, n, CROP, CROP))
    crops = np.stack([
        800 * blob + 2 * noise[0],
        300 * blob ** (1 + lab) + 1.5 * noise[1],
        500 * (blob > 0.5) * (lab == 2) + noise[2],
        200 * blob + noise[3],
    ], axis=-1).astype(np.float32)
    return crops, labels


def normalize_numpy_0_to_1(image):
    image = image - image.min()
    return image / image.max()


def normalize_tensor_per_channel(tensor):
    mean = tensor.mean(dim=(1, 2), keepdim=True)
    std = tensor.std(dim=(1, 2), keepdim=True)
    return (tensor - mean) / std


class SingleCellDataset(Dataset):
    def __init__(self, crops, labels):
        self.crops = crops
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        image = normalize_numpy_0_to_1(self.crops[idx])
        if image.shape[-1] < IN_CHANNELS:
            channels_to_add = IN_CHANNELS - image.shape[-1]
            new_channels = np.zeros((image.shape[0], image.shape[1], channels_to_add), dtype=np.float32)
            image = np.concatenate((image, new_channels), axis=-1)
        image = torch.from_numpy(image).permute(2, 0, 1).contiguous()
        image = normalize_tensor_per_channel(image)
        return image, int(self.labels[idx])


class CellCNN(nn.Module):
    def __init__(self, in_channels=IN_CHANNELS, n_classes=N_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


crops, labels = make_crops(N_CELLS)
train_ds = SingleCellDataset(crops[:640], labels[:640])
val_ds = SingleCellDataset(crops[640:], labels[640:])
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=64)

model = CellCNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

step = 0
for epoch in range(5):
    model.train()
    running = 0.0
    for images, targets in train_loader:
        optimizer.zero_grad()
        logits = model(images)
        loss = criterion(logits, targets)
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, targets in val_loader:
            correct += (model(images).argmax(1) == targets).sum().item()
    print(f"epoch {epoch} train_loss {running / len(train_loader):.4f} val_acc {correct / len(val_ds):.3f}")
