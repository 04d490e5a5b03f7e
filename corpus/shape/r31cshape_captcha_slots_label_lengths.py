"""Captcha recognition with a small CNN that reads the characters slot by slot.

Captcha strings have 6 or 7 characters; every image is rendered to the same width, the
characters are encoded 1..N (0 means an empty slot) and each of the MAX_LEN output slots
is trained with cross-entropy.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

CHARS = "abcdefgh23456789"
IMG_H, IMG_W, CHAR_W = 20, 80, 10
MAX_LEN = 7

GLYPHS = np.random.RandomState(7).rand(len(CHARS), IMG_H, CHAR_W).astype(np.float32) > 0.5


def render(text, rng):
    img = 0.15 * rng.randn(1, IMG_H, IMG_W).astype(np.float32)
    x = rng.randint(0, 4)
    for ch in text:
        img[0, :, x:x + CHAR_W] += GLYPHS[CHARS.index(ch)]
        x += CHAR_W
    return img


class CaptchaDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.texts = ["".join(rng.choice(list(CHARS), rng.randint(6, MAX_LEN + 1))) for _ in range(n)]
        self.images = [render(t, rng) for t in self.texts]

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, item):
        image = torch.from_numpy(self.images[item])
        target = torch.tensor([CHARS.index(c) + 1 for c in self.texts[item]], dtype=torch.long)
        return {"images": image, "targets": target}


class CaptchaModel(nn.Module):
    def __init__(self, num_chars):
        super().__init__()
        self.num_classes = num_chars + 1
        self.conv_1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.pool_1 = nn.MaxPool2d(kernel_size=2)
        self.conv_2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.pool_2 = nn.MaxPool2d(kernel_size=2)
        self.linear_1 = nn.Linear(32 * 5 * 20, 256)
        self.drop_1 = nn.Dropout(0.2)
        self.output = nn.Linear(256, MAX_LEN * self.num_classes)

    def forward(self, images):
        x = self.pool_1(F.relu(self.conv_1(images)))
        x = self.pool_2(F.relu(self.conv_2(x)))         # (bs, 32, 5, 20)
        x = self.drop_1(F.relu(self.linear_1(x.flatten(1))))
        return self.output(x).view(-1, MAX_LEN, self.num_classes)


def decode(logits):
    out = []
    for seq in logits.argmax(2).tolist():
        out.append("".join(CHARS[k - 1] for k in seq if k != 0))
    return out


train_loader = DataLoader(CaptchaDataset(1280, seed=1), batch_size=32, shuffle=True)
val_set = CaptchaDataset(256, seed=2)
val_loader = DataLoader(val_set, batch_size=64)

model = CaptchaModel(len(CHARS))
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(5):
    model.train()
    fin_loss = 0.0
    for data in train_loader:
        optimizer.zero_grad()
        logits = model(data["images"])
        loss = criterion(logits.reshape(-1, logits.size(-1)), data["targets"].reshape(-1))
        loss.backward()
        optimizer.step()
        fin_loss += loss.item()
    model.eval()
    preds = []
    with torch.no_grad():
        for data in val_loader:
            preds += decode(model(data["images"]))
    acc = np.mean([p == t for p, t in zip(preds, val_set.texts)])
    print(f"Epoch {epoch}: train loss {fin_loss / len(train_loader):.4f}  val word acc {acc:.3f}  e.g. {preds[0]!r} vs {val_set.texts[0]!r}")
