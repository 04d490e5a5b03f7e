"""Multi-label face-attribute classifier on a CelebA-style dataset.

The "image folder" and the annotation tables (list_eval_partition, list_attr)
are generated in memory: each 24x24 gray face is drawn from its six binary
attributes (glasses, smiling, bangs, ...), so the attributes are visible in
the pixels. The dataset class reads the tables the way the CelebA loader does.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

ATTR_NAMES = ["Eyeglasses", "Smiling", "Bangs", "Mustache", "Pale_Skin", "Wearing_Hat"]
N_IMAGES = 2500
SIZE = 24


def render_face(attrs, rng):
    img = rng.normal(0.0, 0.35, (SIZE, SIZE)).astype(np.float32)
    if attrs[0]:
        img[8:11, 4:20] += 1.0
    if attrs[1]:
        img[17:19, 7:17] += 1.0
    if attrs[2]:
        img[2:6, 3:21] += 1.0
    if attrs[3]:
        img[14:16, 8:16] -= 1.0
    if attrs[4]:
        img += 0.5
    if attrs[5]:
        img[0:3, :] -= 1.0
    return img


def build_annotations(seed=0):
    rng = np.random.RandomState(seed)
    filenames = np.array([f"{i + 1:06d}.jpg" for i in range(N_IMAGES)])
    attr = rng.randint(0, 2, (N_IMAGES, len(ATTR_NAMES)))
    partition = rng.choice([0, 1, 2], size=N_IMAGES, p=[0.8, 0.1, 0.1])
    images = {fn: render_face(a, rng) for fn, a in zip(filenames, attr)}
    return filenames, partition, attr, images


class CelebA(Dataset):
    def __init__(self, annotations, split="train"):
        filenames, partition, attr, images = annotations
        split_map = {"train": 0, "valid": 1, "test": 2, "all": None}
        split_ = split_map[split]
        mask = slice(None) if split_ is None else (partition == split_)

        self.images = images
        self.filename = filenames
        self.attr = torch.as_tensor(attr[mask], dtype=torch.float32)
        self.attr_names = ATTR_NAMES

    def __len__(self):
        return len(self.attr)

    def __getitem__(self, index):
        X = torch.from_numpy(self.images[self.filename[index]]).unsqueeze(0)
        target = self.attr[index]
        return X, target


class AttrNet(nn.Module):
    def __init__(self, n_attr):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 6 * 6, 64), nn.ReLU(), nn.Linear(64, n_attr))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    annotations = build_annotations()
    train_set = CelebA(annotations, split="train")
    valid_set = CelebA(annotations, split="valid")
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=256)
    print(f"train {len(train_set)}  valid {len(valid_set)}")

    model = AttrNet(len(ATTR_NAMES))
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(6):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                acc = ((logits > 0).float() == y).float().mean().item()
                print(f"epoch {epoch} step {step:4d}  loss {loss.item():.4f}  attr acc {acc:.3f}")
            step += 1

        model.eval()
        correct, total, vloss = 0.0, 0, 0.0
        with torch.no_grad():
            for x, y in valid_loader:
                logits = model(x)
                vloss += criterion(logits, y).item() * len(y)
                correct += ((logits > 0).float() == y).float().sum().item()
                total += len(y)
        print(f"== epoch {epoch}: valid loss {vloss / total:.4f}  mean attr acc {correct / (total * len(ATTR_NAMES)):.3f}")


if __name__ == "__main__":
    main()
