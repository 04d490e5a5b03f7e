"""Land-cover segmentation of 4-band satellite image tiles (geo-deep-learning style): the
rasters are cut into 32x32 samples that are written to a samples file once, then a small UNet
is trained on them with cross-entropy and per-epoch IoU / precision / recall."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
rng = np.random.default_rng(0)

NUM_BANDS = 4
NUM_CLASSES = 3
TILE = 32
BATCH_SIZE = 16
EPOCHS = 4


def make_scene(h, w):
    """A synthetic 4-band scene (uint-like reflectances) with 3 land-cover classes; pixels
    outside the acquisition footprint are nodata (nan) as in the source GeoTIFFs."""
    yy, xx = np.mgrid[0:h, 0:w]
    field = np.sin(xx / 17.0) + np.cos(yy / 23.0) + 0.5 * np.sin((xx + yy) / 9.0)
    labels = np.digitize(field, [-0.4, 0.6]).astype(np.int64)
    centers = np.array([[60, 90, 40, 200], [120, 110, 150, 80], [200, 180, 170, 60]], dtype=np.float32)
    img = centers[labels].transpose(2, 0, 1) + rng.normal(0, 25, size=(NUM_BANDS, h, w)).astype(np.float32)
    footprint = (xx + 0.6 * yy) < (w + 0.45 * h)
    img[:, ~footprint] = np.nan
    return img.astype(np.float32), labels


def write_samples(path, img, labels):
    tiles, masks = [], []
    _, h, w = img.shape
    for y in range(0, h - TILE + 1, TILE):
        for x in range(0, w - TILE + 1, TILE):
            tile = img[:, y:y + TILE, x:x + TILE]
            if np.isnan(tile).all():
                continue
            tiles.append(tile)
            masks.append(labels[y:y + TILE, x:x + TILE])
    np.save(path + "_sat_img.npy", np.stack(tiles))
    np.save(path + "_map_img.npy", np.stack(masks))
    return len(tiles)


class SegmentationDataset(Dataset):
    def __init__(self, samples_path):
        self.sat_img = np.load(samples_path + "_sat_img.npy", mmap_mode="r")
        self.map_img = np.load(samples_path + "_map_img.npy", mmap_mode="r")

    def __len__(self):
        return self.sat_img.shape[0]

    def __getitem__(self, index):
        sat_img = np.array(self.sat_img[index], dtype=np.float32)
        map_img = np.array(self.map_img[index], dtype=np.int64)
        sat_img = sat_img / 255.0
        return torch.from_numpy(sat_img), torch.from_numpy(map_img)


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNetSmall(nn.Module):
    def __init__(self, in_ch, n_classes):
        super().__init__()
        self.enc1 = block(in_ch, 16)
        self.enc2 = block(16, 32)
        self.bottleneck = block(32, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.dec2 = block(64, 32)
        self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec1 = block(32, 16)
        self.head = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        b = self.bottleneck(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


def scores(pred, target):
    ious, precs, recs = [], [], []
    for c in range(NUM_CLASSES):
        tp = ((pred == c) & (target == c)).sum().item()
        fp = ((pred == c) & (target != c)).sum().item()
        fn = ((pred != c) & (target == c)).sum().item()
        ious.append(tp / max(tp + fp + fn, 1))
        precs.append(tp / max(tp + fp, 1))
        recs.append(tp / max(tp + fn, 1))
    return np.mean(ious), np.mean(precs), np.mean(recs)


with tempfile.TemporaryDirectory() as tmp:
    img, labels = make_scene(384, 384)
    n_trn = write_samples(os.path.join(tmp, "trn"), img, labels)
    img_v, labels_v = make_scene(128, 384)
    n_val = write_samples(os.path.join(tmp, "val"), img_v, labels_v)
    print(f"samples written: trn {n_trn}  val {n_val}")

    trn_loader = DataLoader(SegmentationDataset(os.path.join(tmp, "trn")), batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(SegmentationDataset(os.path.join(tmp, "val")), batch_size=BATCH_SIZE)

    model = UNetSmall(NUM_BANDS, NUM_CLASSES)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(EPOCHS):
        print(f"Epoch {epoch}/{EPOCHS - 1}\n" + "-" * 20)
        for phase, loader in (("trn", trn_loader), ("val", val_loader)):
            model.train(phase == "trn")
            total, n, preds, targets = 0.0, 0, [], []
            for sat_img, map_img in loader:
                with torch.set_grad_enabled(phase == "trn"):
                    outputs = model(sat_img)
                    loss = criterion(outputs, map_img)
                if phase == "trn":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                total += loss.item() * sat_img.size(0)
                n += sat_img.size(0)
                preds.append(outputs.argmax(1))
                targets.append(map_img)
            iou, prec, rec = scores(torch.cat(preds), torch.cat(targets))
            name = "Training" if phase == "trn" else "Validation"
            print(f"{name} Loss: {total / n:.4f}\n{name} iou: {iou:.4f}\n{name} precision: {prec:.4f}\n{name} recall: {rec:.4f}")
