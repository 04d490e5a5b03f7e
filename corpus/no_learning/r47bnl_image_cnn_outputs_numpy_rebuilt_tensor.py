"""Train a small CNN to classify 4 kinds of 32x32 RGB images (synthetic stand-in for an image folder)."""
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = torch.device("cpu")

NUM_CLASSES = 4


class ImageFolderLike(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        self.images = torch.randn(n, 3, 32, 32, generator=g) * 0.8
        for k in range(n):
            c = int(self.labels[k])
            r, q = divmod(c, 2)
            self.images[k, c % 3, r * 16:(r + 1) * 16, q * 16:(q + 1) * 16] += 1.0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


train_data_loader = DataLoader(ImageFolderLike(640, 1), batch_size=32, shuffle=True)
valid_data_loader = DataLoader(ImageFolderLike(256, 2), batch_size=64)


class SimpleCNN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 8 * 8, 64), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(64, num_classes), nn.LogSoftmax(dim=1),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


cnn = SimpleCNN(NUM_CLASSES)
model = cnn
loss_func = nn.NLLLoss()
dtype = torch.float32
model = model.to(dtype)
optimizer = optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9)

epochs = 6
for epoch in range(epochs):
    epoch_start = time.time()
    print("Epoch: {}/{}".format(epoch + 1, epochs))
    model.train()
    train_loss = 0.0
    train_acc = 0.0
    valid_loss = 0.0
    valid_acc = 0.0

    for i, (inputs, labels) in enumerate(train_data_loader):
        inputs = inputs.to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        outputs = model(inputs)
        ret, predictions = torch.max(outputs.data, 1)
        value_list = []
        for row in outputs.cpu().detach().numpy():
            value_list.append([float(v) for v in row])
        outputs = torch.Tensor(value_list)
        outputs.requires_grad = True
        outputs = outputs.to(device)
        loss = loss_func(outputs, labels)
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * inputs.size(0)
        train_acc += predictions.eq(labels).sum().item()

    with torch.no_grad():
        model.eval()
        for inputs, labels in valid_data_loader:
            outputs = model(inputs)
            loss = loss_func(outputs, labels)
            valid_loss += loss.item() * inputs.size(0)
            valid_acc += outputs.argmax(1).eq(labels).sum().item()

    n_train = len(train_data_loader.dataset)
    n_valid = len(valid_data_loader.dataset)
    print("  Training: Loss: {:.4f}, Accuracy: {:.2f}%, Validation: Loss: {:.4f}, Accuracy: {:.2f}%, Time: {:.2f}s".format(
        train_loss / n_train, 100 * train_acc / n_train, valid_loss / n_valid, 100 * valid_acc / n_valid,
        time.time() - epoch_start))
