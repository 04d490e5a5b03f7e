"""Row-by-row LSTM classifier for 28x28 handwritten-digit images (many-to-one).

Adapted from yunjey/pytorch-tutorial's 02-intermediate/recurrent_neural_network/main.py: each
image is read as a sequence of 28 rows of 28 pixels, a 2-layer LSTM runs over the rows and a
linear layer classifies the hidden state of the last time step. torchvision is not available
here, so the digits are synthetic: ten stroke templates drawn in the central 20x20 box of a
28x28 canvas (the border is empty, as in MNIST), jittered by a couple of pixels, with ink noise.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

device = torch.device('cpu')

# Hyper-parameters
sequence_length = 28
input_size = 28
hidden_size = 128
num_layers = 2
num_classes = 10
batch_size = 100
num_epochs = 2
learning_rate = 0.01


def make_templates(rng):
    """Ten digit-like stroke templates inside rows/cols 4..23."""
    yy, xx = np.mgrid[0:28, 0:28]
    templates = []
    for _ in range(num_classes):
        img = np.zeros((28, 28), dtype=np.float32)
        pts = rng.uniform(7, 20, size=(5, 2))
        for (y0, x0), (y1, x1) in zip(pts[:-1], pts[1:]):
            for t in np.linspace(0, 1, 25):
                cy, cx = y0 + t * (y1 - y0), x0 + t * (x1 - x0)
                img = np.maximum(img, np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 2.0))
        templates.append(img)
    return np.stack(templates)


class SyntheticDigits(Dataset):
    def __init__(self, n, templates, seed):
        rng = np.random.RandomState(seed)
        self.labels = rng.randint(0, num_classes, size=n)
        images = np.zeros((n, 28, 28), dtype=np.float32)
        for i, c in enumerate(self.labels):
            dy, dx = rng.randint(-2, 3, size=2)
            img = np.roll(np.roll(templates[c], dy, axis=0), dx, axis=1)
            img = img * rng.uniform(0.7, 1.0) + 0.15 * rng.randn(28, 28) * (img > 0.05)
            images[i] = np.clip(img, 0.0, 1.0)
        self.images = torch.from_numpy(images).unsqueeze(1)
        self.labels = torch.from_numpy(self.labels).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


templates = make_templates(np.random.RandomState(1))
train_dataset = SyntheticDigits(5000, templates, seed=2)
test_dataset = SyntheticDigits(1000, templates, seed=3)

train_loader = DataLoader(dataset=train_dataset, batch_size=batch_size, shuffle=True)
test_loader = DataLoader(dataset=test_dataset, batch_size=batch_size, shuffle=False)


# Recurrent neural network (many-to-one)
class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        # Forward propagate LSTM
        out, _ = self.lstm(x)

        # Decode the hidden state of the last time step
        out = self.fc(out[:, -1, :])
        return out


model = RNN(input_size, hidden_size, num_layers, num_classes).to(device)

# Loss and optimizer
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

# Train the model
t0 = time.time()
total_step = len(train_loader)
for epoch in range(num_epochs):
    correct = 0
    for i, (images, labels) in enumerate(train_loader):
        images = images.reshape(-1, sequence_length, input_size).to(device)
        labels = labels.to(device)

        # Forward pass
        outputs = model(images)
        loss = criterion(outputs, labels)

        # Backward and optimize
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        correct += (outputs.argmax(1) == labels).sum().item()
        if (i + 1) % 10 == 0:
            print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}  ({:.1f}s)'
                  .format(epoch + 1, num_epochs, i + 1, total_step, loss.item(), time.time() - t0))
    print('Epoch [{}/{}] train accuracy: {:.2f} %'.format(epoch + 1, num_epochs, 100 * correct / len(train_dataset)))

# Test the model
with torch.no_grad():
    correct = 0
    total = 0
    for images, labels in test_loader:
        images = images.reshape(-1, sequence_length, input_size).to(device)
        labels = labels.to(device)
        outputs = model(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()

    print('Test Accuracy of the model on the {} test images: {} %'.format(total, 100 * correct / total))
