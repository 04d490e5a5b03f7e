"""Binary defect segmentation: a small encoder-decoder CNN with one output channel,
trained with BCEWithLogitsLoss, validated each epoch with a mean-IoU metric built
from a confusion matrix (synthetic surface images with rectangular defects)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


class DefectDataset(Dataset):
    def __init__(self, n, size=48, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = []
        self.masks = []
        for _ in range(n):
            img = 0.3 * torch.rand(1, size, size, generator=g)
            mask = torch.zeros(1, size, size, dtype=torch.long)
            for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
                h, w = torch.randint(6, 16, (2,), generator=g).tolist()
                y, x = torch.randint(0, size - 16, (2,), generator=g).tolist()
                img[:, y:y + h, x:x + w] += 0.5
                mask[:, y:y + h, x:x + w] = 1
            self.images.append(img)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.masks[idx]


class SegNet(nn.Module):
    def __init__(self, in_channels=1, out_channels=1):
        super().__init__()
        self.out_channels = out_channels
        self.enc1 = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(32 + 16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Conv2d(16, out_channels, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        d1 = F.interpolate(e2, scale_factor=2, mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([d1, e1], dim=1))
        return self.head(d1)


class MeanIoU:
    def __init__(self, num_classes, ignore_index=255):
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.results = []

    def compute_confusion_matrix(self, prediction, label, num_classes):
        mask = label != self.ignore_index
        prediction, label = prediction[mask], label[mask]
        confusion_matrix_1d = torch.bincount(num_classes * label + prediction, minlength=num_classes ** 2)
        confusion_matrix = confusion_matrix_1d.reshape(num_classes, num_classes)
        return confusion_matrix

    def add(self, predictions, labels):
        for prediction, label in zip(predictions, labels):
            self.results.append(self.compute_confusion_matrix(prediction, label, self.num_classes))

    def compute(self):
        cm = torch.stack(self.results).sum(0).double()
        iou = cm.diag() / (cm.sum(0) + cm.sum(1) - cm.diag())
        self.results = []
        return iou.mean().item(), iou


train_loader = DataLoader(DefectDataset(320, seed=1), batch_size=16, shuffle=True)
val_loader = DataLoader(DefectDataset(64, seed=2), batch_size=16)

model = SegNet(in_channels=1, out_channels=1)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
miou = MeanIoU(num_classes=model.out_channels)

for epoch in range(4):
    model.train()
    running = 0.0
    for step, (images, masks) in enumerate(train_loader):
        optimizer.zero_grad()
        logits = model(images)
        loss = criterion(logits, masks.float())
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 5 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    print(f"epoch {epoch} train loss {running / len(train_loader):.4f}")

    model.eval()
    val_loss = 0.0
    with torch.no_grad():
        for images, masks in val_loader:
            logits = model(images)
            val_loss += criterion(logits, masks.float()).item()
            preds = (torch.sigmoid(logits) > 0.5).long().squeeze(1)
            miou.add(preds, masks.squeeze(1))
    mean_iou, per_class = miou.compute()
    print(f"epoch {epoch} val loss {val_loss / len(val_loader):.4f} mIoU {mean_iou:.4f} per-class {per_class.tolist()}")
