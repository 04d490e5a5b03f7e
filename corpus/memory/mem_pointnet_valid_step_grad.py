"""PointNet classifier for point clouds (sphere / cube / cylinder surfaces).

A small fit() loop in the style of skorch's NeuralNet: train_step / validation_step per batch,
batch losses recorded, and the validation predictions of the epoch cached so that the epoch
accuracy can be scored at the end of each epoch.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(11)

NUM_POINTS = 256


def sample_shape(label, n):
    if label == 0:  # sphere
        p = torch.randn(n, 3)
        p = p / p.norm(dim=1, keepdim=True)
    elif label == 1:  # cube surface
        p = torch.rand(n, 3) * 2 - 1
        face = torch.randint(0, 3, (n,))
        p[torch.arange(n), face] = torch.sign(torch.randn(n))
    else:  # cylinder surface
        angle = torch.rand(n) * 2 * math.pi
        p = torch.stack([torch.cos(angle), torch.sin(angle), torch.rand(n) * 2 - 1], dim=1)
    theta = torch.rand(()) * 2 * math.pi
    rot = torch.tensor([[math.cos(theta), -math.sin(theta), 0.0],
                        [math.sin(theta), math.cos(theta), 0.0],
                        [0.0, 0.0, 1.0]])
    p = p @ rot.T * (0.7 + 0.6 * torch.rand(()))
    return p + 0.02 * torch.randn(n, 3)


class PointClouds(Dataset):
    def __init__(self, n):
        self.y = torch.randint(0, 3, (n,))
        self.X = torch.stack([sample_shape(int(c), NUM_POINTS).T for c in self.y])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


class PointNet(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 256, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(256)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, k)
        self.dropout = nn.Dropout(0.3)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2)[0]
        x = self.dropout(F.relu(self.fc1(x)))
        return self.fc2(x)


def train_step(model, criterion, optimizer, Xi, yi):
    model.train()
    optimizer.zero_grad()
    y_pred = model(Xi)
    loss = criterion(y_pred, yi)
    loss.backward()
    optimizer.step()
    return {"loss": loss, "y_pred": y_pred}


def validation_step(model, criterion, Xi, yi):
    model.eval()
    y_pred = model(Xi)
    loss = criterion(y_pred, yi)
    return {"loss": loss, "y_pred": y_pred}


def fit(model, train_loader, valid_loader, max_epochs=5, lr=3e-3):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for epoch in range(max_epochs):
        train_losses = []
        for Xi, yi in train_loader:
            step = train_step(model, criterion, optimizer, Xi, yi)
            train_losses.append(step["loss"].item())

        valid_losses, y_preds, y_trues = [], [], []
        for batch_idx, (Xi, yi) in enumerate(valid_loader):
            step = validation_step(model, criterion, Xi, yi)
            valid_losses.append(step["loss"].item())
            y_preds.append(step["y_pred"])
            y_trues.append(yi)
            print(f"  valid batch {batch_idx}: loss {valid_losses[-1]:.4f}")
        valid_acc = (torch.cat(y_preds).argmax(1) == torch.cat(y_trues)).float().mean().item()

        row = {"epoch": epoch + 1, "train_loss": sum(train_losses) / len(train_losses),
               "valid_loss": sum(valid_losses) / len(valid_losses), "valid_acc": valid_acc}
        history.append(row)
        print("epoch {epoch}  train_loss {train_loss:.4f}  valid_loss {valid_loss:.4f}  "
              "valid_acc {valid_acc:.3f}".format(**row))
    return history


if __name__ == "__main__":
    train_loader = DataLoader(PointClouds(320), batch_size=32, shuffle=True)
    valid_loader = DataLoader(PointClouds(768), batch_size=32)
    fit(PointNet(), train_loader, valid_loader)
