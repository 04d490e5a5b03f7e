"""CAPTCHA solver: train a CNN on segmented characters (26 letters + 10 digits), keep the
best model by validation accuracy, then report accuracy on the held-out test characters.
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VALIDATION_BATCH_SIZE = 512
NUM_CLASSES = 36
LEARNING_RATE = 1e-3
BATCH_SIZE = 64
NUM_EPOCHS = 3


class CharactersDataset(Dataset):
    """Synthetic 1x24x24 character crops: a per-class glyph template plus noise and a small shift."""

    templates = (torch.rand(NUM_CLASSES, 1, 24, 24, generator=torch.Generator().manual_seed(7)) > 0.6).float()

    def __init__(self, n, seed, validate=False):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        imgs = self.templates[self.labels].clone()
        shifts = torch.randint(-1, 2, (n, 2), generator=g)
        for i in range(n):
            imgs[i] = torch.roll(imgs[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2))
        self.imgs = imgs + 0.35 * torch.randn(imgs.shape, generator=g)
        self.validate = validate

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {"imgs": self.imgs[idx], "labels": self.labels[idx]}


class CharacterClassifier(nn.Module):
    def __init__(self, num_classes=36):
        super(CharacterClassifier, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Linear(32 * 6 * 6, 128), nn.ReLU(), nn.Linear(128, num_classes))

    def forward(self, img):
        return self.classifier(self.features(img).flatten(1))


model_dir = tempfile.mkdtemp()
model_fn = "epoch_{}_lr_{}_batchsize_{}"
device = torch.device("cpu")

model = CharacterClassifier(num_classes=NUM_CLASSES).to(device)
train_dataset = CharactersDataset(3200, seed=1, validate=False)
val_dataset = CharactersDataset(600, seed=2, validate=True)
test_dataset = CharactersDataset(200, seed=3, validate=True)
print("Train dataset size: {}".format(len(train_dataset)))
print("Validation dataset size: {}".format(len(val_dataset)))
print("Test dataset size: {}".format(len(test_dataset)))

optimizer = optim.Adam(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.999))
loss_func = nn.CrossEntropyLoss(reduction="sum").to(device)

train_loader = DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_dataset, batch_size=VALIDATION_BATCH_SIZE, shuffle=False)
test_loader = DataLoader(test_dataset, batch_size=1, shuffle=False)

highest_validation_accuracy = None
for epoch in range(NUM_EPOCHS):
    model.train()
    for batch_id, samples in enumerate(train_loader):
        labels = samples["labels"].to(device, dtype=torch.int64)
        imgs = samples["imgs"].to(device)
        pred = model(imgs)
        loss = loss_func(pred, labels)
        model.zero_grad()
        loss.backward()
        optimizer.step()
        if batch_id % 10 == 0:
            print("(train) => Epoch {}/{} - Batch {}/{} - Loss: {:.4f}".format(epoch, NUM_EPOCHS, batch_id, len(train_loader), loss.item()))

    model.eval()
    validation_loss = 0.0
    correct = 0
    with torch.no_grad():
        for batch_id, samples in enumerate(val_loader):
            labels = samples["labels"].to(device, dtype=torch.int64)
            imgs = samples["imgs"].to(device)
            pred = model(imgs)
            pred_label = torch.argmax(pred, 1)
            correct += torch.sum(pred_label == labels).item()
            validation_loss += loss_func(pred, labels).item()
    validation_loss /= len(val_loader)
    validation_accuracy = correct / len(val_dataset)
    print("(validation) => Epoch {}/{} - Avg. Loss: {:.4f} - Accuracy: {:.2f}%".format(epoch, NUM_EPOCHS, validation_loss, validation_accuracy * 100.0))
    if highest_validation_accuracy is None or validation_accuracy > highest_validation_accuracy:
        torch.save(model.state_dict(), os.path.join(model_dir, model_fn.format(epoch, LEARNING_RATE, BATCH_SIZE)))
        highest_validation_accuracy = validation_accuracy

# test the model
model.eval()
test_loss = 0.0
correct = 0
with torch.no_grad():
    for batch_id, samples in enumerate(test_loader):
        labels = samples["labels"].to(device)
        imgs = samples["imgs"].to(device)
        pred = model(imgs).to(device)

        pred_score, pred_label = torch.max(pred, 0)
        correct += 1 if pred_label == labels[0] else 0

        loss = loss_func(pred, labels)
        test_loss += loss.item()
        if batch_id % 50 == 0:
            print("(test) => Batch {}/{} - Loss: {:.4f}, Running loss: {:.4f}".format(batch_id, len(test_loader), loss.item(), test_loss))
test_loss /= len(test_loader)
test_accuracy = correct / len(test_dataset)
print("(test) => Avg. Loss: {:.4f}".format(test_loss))
print("Test accuracy: {}%".format(round(test_accuracy * 100.0, 2)))
