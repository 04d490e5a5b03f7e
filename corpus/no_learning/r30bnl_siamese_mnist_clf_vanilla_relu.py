"""MNIST-style classification baseline from a siamese/triplet embedding repo: a small conv
embedding net with a 2-D embedding, a nonlinearity and a linear classifier on top, trained with
NLLLoss on log-softmax scores (Adam 1e-2, StepLR). Digits are generated in the script."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim import lr_scheduler
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

Nonlinearity = nn.ReLU


class FakeDigits(Dataset):
    def __init__(self, n, templates, rng):
        self.labels = rng.integers(0, 10, size=n)
        imgs = templates[self.labels] + 0.2 * rng.standard_normal((n, 28, 28)).astype(np.float32)
        shifts = rng.integers(-2, 3, size=(n, 2))
        for i in range(n):
            imgs[i] = np.roll(imgs[i], tuple(shifts[i]), axis=(0, 1))
        self.imgs = ((imgs - 0.1307) / 0.3081).astype(np.float32)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.imgs[i]).unsqueeze(0), int(self.labels[i])


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 32, 5), Nonlinearity(),
                                     nn.MaxPool2d(2, stride=2),
                                     nn.Conv2d(32, 64, 5), Nonlinearity(),
                                     nn.MaxPool2d(2, stride=2))
        self.fc = nn.Sequential(nn.Linear(64 * 4 * 4, 256), Nonlinearity(),
                                nn.Linear(256, 256), Nonlinearity(),
                                nn.Linear(256, 2))

    def forward(self, x):
        output = self.convnet(x)
        output = output.view(output.size()[0], -1)
        output = self.fc(output)
        return output

    def get_embedding(self, x):
        return self.forward(x)


class ClassificationNet(nn.Module):
    def __init__(self, embedding_net, n_classes):
        super().__init__()
        self.embedding_net = embedding_net
        self.n_classes = n_classes
        self.nonlinear = Nonlinearity()
        self.fc1 = nn.Linear(2, n_classes)

    def forward(self, x):
        output = self.embedding_net(x)
        output = self.nonlinear(output)
        scores = F.log_softmax(self.fc1(output), dim=-1)
        return scores


def train_epoch(train_loader, model, loss_fn, optimizer):
    model.train()
    total_loss = 0
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = model(data)
        loss = loss_fn(outputs, target)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(train_loader)


def test_epoch(val_loader, model, loss_fn):
    model.eval()
    val_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in val_loader:
            outputs = model(data)
            val_loss += loss_fn(outputs, target).item()
            correct += (outputs.argmax(1) == target).sum().item()
    return val_loss / len(val_loader), correct / len(val_loader.dataset)


def main():
    rng = np.random.default_rng(0)
    templates = (rng.random((10, 28, 28)) < 0.25).astype(np.float32)
    train_dataset = FakeDigits(1600, templates, rng)
    test_dataset = FakeDigits(320, templates, rng)
    train_loader = DataLoader(train_dataset, batch_size=64, shuffle=True)
    test_loader = DataLoader(test_dataset, batch_size=256, shuffle=False)

    embedding_net = EmbeddingNet()
    model = ClassificationNet(embedding_net, n_classes=10)
    loss_fn = nn.NLLLoss()
    lr = 1e-2
    optimizer = optim.Adam(model.parameters(), lr=lr)
    scheduler = lr_scheduler.StepLR(optimizer, 8, gamma=0.1, last_epoch=-1)
    n_epochs = 6

    for epoch in range(n_epochs):
        train_loss = train_epoch(train_loader, model, loss_fn, optimizer)
        scheduler.step()
        val_loss, accuracy = test_epoch(test_loader, model, loss_fn)
        print(f"Epoch: {epoch + 1}/{n_epochs}. Train set: Average loss: {train_loss:.4f}"
              f"\tValidation set: Average loss: {val_loss:.4f}\tAccuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
