"""Binary "person" segmentation with a small U-Net, after the segmentation_models_pytorch CamVid
example notebook (Dataset class with class_values, DiceLoss, IoU / Fscore metrics, train/valid
epochs), adapted to one class.

The images are synthetic street-like scenes (textured background, one upright elliptical
"person" of a different colour per image); the annotation maps hold 0 for background and 1 for
person, as in a converted COCO subset.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

IMG_SIZE = 48
CLASSES = ["background", "person"]


def make_scene(rng):
    yy, xx = np.mgrid[0:IMG_SIZE, 0:IMG_SIZE].astype(np.float32)
    base = rng.uniform(60, 160, size=3)
    texture = 25 * np.sin(xx / rng.uniform(3, 8) + rng.uniform(0, 6)) * np.cos(yy / rng.uniform(3, 8))
    image = base[None, None, :] + texture[..., None] + rng.normal(0, 12, size=(IMG_SIZE, IMG_SIZE, 3))
    cy, cx = rng.uniform(12, 36), rng.uniform(8, 40)
    ry, rx = rng.uniform(7, 13), rng.uniform(3, 6)
    person = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
    colour = rng.uniform(0, 255, size=3)
    while np.abs(colour - base).sum() < 150:
        colour = rng.uniform(0, 255, size=3)
    image[person] = colour + rng.normal(0, 12, size=(person.sum(), 3))
    annotation = person.astype(np.uint8)
    return np.clip(image, 0, 255).astype(np.uint8), annotation


class PersonDataset(Dataset):
    def __init__(self, n_images, classes=None, seed=0):
        rng = np.random.default_rng(seed)
        scenes = [make_scene(rng) for _ in range(n_images)]
        self.images = [s[0] for s in scenes]
        self.masks = [s[1] for s in scenes]
        self.class_values = [CLASSES.index(c.lower()) for c in classes]

    def __getitem__(self, i):
        image = self.images[i]
        mask = self.masks[i]
        mask = (mask == self.class_values[0]).astype("float32")
        image = (image.astype("float32") / 255.0 - 0.45) / 0.25
        image = image.transpose(2, 0, 1)
        return torch.from_numpy(image), torch.from_numpy(mask)

    def __len__(self):
        return len(self.images)


def f_score(pr, gt, beta=1, eps=1e-7, threshold=None):
    if threshold is not None:
        pr = (pr > threshold).type(pr.dtype)
    tp = torch.sum(gt * pr)
    fp = torch.sum(pr) - tp
    fn = torch.sum(gt) - tp
    score = ((1 + beta ** 2) * tp + eps) / ((1 + beta ** 2) * tp + beta ** 2 * fn + fp + eps)
    return score


def iou(pr, gt, eps=1e-7, threshold=0.5):
    pr = (pr > threshold).type(pr.dtype)
    intersection = torch.sum(gt * pr)
    union = torch.sum(gt) + torch.sum(pr) - intersection + eps
    return (intersection + eps) / union


class DiceLoss(nn.Module):
    __name__ = "dice_loss"

    def forward(self, y_pr, y_gt):
        return 1 - f_score(torch.sigmoid(y_pr), y_gt)


def conv_block(c_in, c_out):
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    def __init__(self, in_channels=3, classes=1):
        super().__init__()
        self.enc1 = conv_block(in_channels, 16)
        self.enc2 = conv_block(16, 32)
        self.enc3 = conv_block(32, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.dec2 = conv_block(64, 32)
        self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec1 = conv_block(32, 16)
        self.segmentation_head = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(e3), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.segmentation_head(d1)


train_dataset = PersonDataset(192, classes=["person"], seed=1)
valid_dataset = PersonDataset(64, classes=["person"], seed=2)
train_loader = DataLoader(train_dataset, batch_size=8, shuffle=True)
valid_loader = DataLoader(valid_dataset, batch_size=8, shuffle=False)

model = UNet(in_channels=3, classes=len(["person"]))
loss = DiceLoss()
optimizer = torch.optim.Adam([dict(params=model.parameters(), lr=0.001)])


def run_epoch(loader, train):
    model.train(train)
    logs = {"dice_loss": 0.0, "iou_score": 0.0, "fscore": 0.0}
    for x, y in loader:
        with torch.set_grad_enabled(train):
            prediction = model(x)
            loss_value = loss(prediction, y)
            if train:
                optimizer.zero_grad()
                loss_value.backward()
                optimizer.step()
        probs = torch.sigmoid(prediction.detach())
        logs["dice_loss"] += loss_value.item() / len(loader)
        logs["iou_score"] += iou(probs, y).item() / len(loader)
        logs["fscore"] += f_score(probs, y, threshold=0.5).item() / len(loader)
    return logs


max_score = 0
for i in range(4):
    print(f"\nEpoch: {i}")
    train_logs = run_epoch(train_loader, train=True)
    valid_logs = run_epoch(valid_loader, train=False)
    print("train: " + ", ".join(f"{k} - {v:.4f}" for k, v in train_logs.items()))
    print("valid: " + ", ".join(f"{k} - {v:.4f}" for k, v in valid_logs.items()))
    if max_score < valid_logs["iou_score"]:
        max_score = valid_logs["iou_score"]
        print("Model saved!")
