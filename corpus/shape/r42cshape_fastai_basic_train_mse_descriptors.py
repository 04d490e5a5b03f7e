"""Regress a molecular property (solubility-like) from 16 descriptors with a fastai-v1
style basic_train loop: fit(epochs, model, loss_func, opt, train_dl, valid_dl)."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class DescriptorDataset(Dataset):
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_data(n, w):
    x = torch.randn(n, 16)
    y = x @ w + 0.5 * torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(n)
    return x, y


def loss_batch(model, xb, yb, loss_func, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def train_epoch(model, dl, opt, loss_func):
    model.train()
    for xb, yb in dl:
        loss_batch(model, xb, yb, loss_func, opt)


def validate(model, dl, loss_func):
    model.eval()
    with torch.no_grad():
        se, n = 0.0, 0
        for xb, yb in dl:
            pred = model(xb).view(-1)
            se += ((pred - yb) ** 2).sum().item()
            n += len(xb)
    return se / n


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    for epoch in range(epochs):
        train_epoch(model, train_dl, opt, loss_func)
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[loss_batch(model, xb, yb, loss_func) for xb, yb in valid_dl])
        val_loss = sum(l * n for l, n in zip(losses, nums)) / sum(nums)
        print(f"epoch {epoch + 1}: valid loss {val_loss:.4f}  valid mse {validate(model, valid_dl, loss_func):.4f}")


def main():
    w = torch.randn(16) / 2
    xtr, ytr = make_data(2048, w)
    xva, yva = make_data(512, w)
    train_dl = DataLoader(DescriptorDataset(xtr, ytr), batch_size=64, shuffle=True)
    valid_dl = DataLoader(DescriptorDataset(xva, yva), batch_size=128)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"target variance {yva.var().item():.4f}")
    fit(6, model, nn.MSELoss(), opt, train_dl, valid_dl)


if __name__ == "__main__":
    main()
