"""2D Aggregation Cross-Entropy (ACE) text recognizer: a small conv net predicts a character
distribution at every cell of its output map and is trained only with per-image character counts."""
import string
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

DICT = "_" + string.ascii_lowercase
CLASS_NUM = 26
CELLS = 4


class WordImageDataset(Dataset):
    def __init__(self, length, glyphs):
        self.images, self.labels = [], []
        for _ in range(length):
            img = 20.0 * torch.rand(1, 16, 16 * CELLS)
            label = torch.zeros(CLASS_NUM + 1)
            n_chars = int(torch.randint(1, CELLS + 1, (1,)))
            slots = torch.randperm(CELLS)[:n_chars]
            for s in slots.tolist():
                c = int(torch.randint(1, CLASS_NUM + 1, (1,)))
                img[0, :, 16 * s:16 * (s + 1)] += 235.0 * glyphs[c - 1]
                label[c] += 1
            self.images.append(img)
            self.labels.append(label)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class ACE(nn.Module):
    def __init__(self, dictionary):
        super().__init__()
        self.dict = dictionary

    def forward(self, input, label):
        bs, h, w, _ = input.size()
        T_ = h * w
        input = input.view(bs, T_, -1)
        self.softmax = input
        label = label.clone()
        label[:, 0] = T_ - label[:, 0]
        input = torch.sum(input, 1)
        input = input / T_
        label = label / T_
        loss = (-torch.sum(torch.log(input) * label)) / bs
        return loss


class ConvEncoderDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),
        )
        self.out = nn.Linear(64, CLASS_NUM + 1)
        self.loss_layer = ACE(DICT)

    def forward(self, input, labels):
        x = self.features(input)
        x = x.permute(0, 2, 3, 1)
        x = F.softmax(self.out(x), dim=-1)
        return self.loss_layer(x, labels)


def count_accuracy(probs, labels):
    pred = probs.argmax(-1)
    counts = F.one_hot(pred, CLASS_NUM + 1).sum(1)[:, 1:].float()
    return (counts == labels[:, 1:]).all(1).float().sum().item()


glyphs = (torch.rand(CLASS_NUM, 16, 16) > 0.6).float()
train_set = WordImageDataset(480, glyphs)
test_set = WordImageDataset(120, glyphs)
train_loader = DataLoader(train_set, batch_size=40, shuffle=True)
test_loader = DataLoader(test_set, batch_size=40, shuffle=False)

model = ConvEncoderDecoder()
optimizer = torch.optim.Adadelta(model.parameters())

step = 0
for epoch in range(10):
    model.train()
    total = 0.0
    for images, labels in train_loader:
        loss = model(images, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        total += loss.item()
        if step % 12 == 0:
            print(f"epoch {epoch} iter {step} loss {loss.item():.4f}")
    model.eval()
    correct, test_loss = 0.0, 0.0
    with torch.no_grad():
        for images, labels in test_loader:
            test_loss += model(images, labels).item()
            correct += count_accuracy(model.loss_layer.softmax, labels)
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} "
          f"test loss {test_loss / len(test_loader):.4f} test acc {correct / len(test_set):.3f}")
