"""Tabular regression benchmark: an MLP method on a synthetic numeric dataset.

Follows the layout of a tabular deep-learning toolbox: a Method class that prepares the data
(numerical features standardised, regression target normalised), builds the model, and runs
fit / train_epoch / validate with early-stopping bookkeeping.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(n_samples=6000, n_features=16, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n_samples, n_features).astype(np.float32)
    w = rng.randn(n_features).astype(np.float32)
    y = X @ w + 0.8 * np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2]
    y = 3.0 * y + 10.0 + 0.3 * rng.randn(n_samples)
    idx = rng.permutation(n_samples)
    n_tr, n_va = int(0.7 * n_samples), int(0.15 * n_samples)
    split = {"train": idx[:n_tr], "val": idx[n_tr:n_tr + n_va], "test": idx[n_tr + n_va:]}
    N = {k: X[v] for k, v in split.items()}
    Y = {k: y[v].astype(np.float32) for k, v in split.items()}
    return N, Y


class MLP(nn.Module):
    def __init__(self, d_in, d_out, d_layers, dropout):
        super().__init__()
        layers = []
        for i, d in enumerate(d_layers):
            layers += [nn.Linear(d_layers[i - 1] if i else d_in, d), nn.ReLU(), nn.Dropout(dropout)]
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Linear(d_layers[-1] if d_layers else d_in, d_out)

    def forward(self, x):
        x = self.blocks(x)
        x = self.head(x)
        if x.shape[-1] == 1:
            x = x.squeeze(-1)
        return x


class MLPMethod:
    def __init__(self, args):
        self.args = args
        self.criterion = F.mse_loss
        self.trlog = {"best_res": float("inf"), "best_epoch": 0}

    def data_format(self, N, Y):
        mean, std = N["train"].mean(0), N["train"].std(0) + 1e-8
        self.N = {k: (v - mean) / std for k, v in N.items()}
        y_train = Y["train"].reshape(-1, 1)
        self.y_info = {"policy": "mean_std", "mean": float(y_train.mean()), "std": float(y_train.std())}
        self.Y = {k: (v.reshape(-1, 1) - self.y_info["mean"]) / self.y_info["std"] for k, v in Y.items()}
        self.d_in = self.N["train"].shape[1]
        self.d_out = 1
        tr = TensorDataset(torch.from_numpy(self.N["train"]), torch.from_numpy(self.Y["train"]))
        va = TensorDataset(torch.from_numpy(self.N["val"]), torch.from_numpy(self.Y["val"]))
        self.train_loader = DataLoader(tr, batch_size=self.args.batch_size, shuffle=True)
        self.val_loader = DataLoader(va, batch_size=1024, shuffle=False)

    def construct_model(self):
        self.model = MLP(self.d_in, self.d_out, d_layers=[256, 256], dropout=0.1)

    def fit(self, N, Y):
        self.data_format(N, Y)
        self.construct_model()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.lr,
                                           weight_decay=self.args.weight_decay)
        for epoch in range(self.args.max_epoch):
            tic = time.time()
            tl = self.train_epoch(epoch)
            rmse = self.validate(epoch)
            print(f"epoch {epoch:2d}  train_loss {tl:.4f}  val_rmse {rmse:.4f}  ({time.time() - tic:.1f}s)")

    def train_epoch(self, epoch):
        self.model.train()
        total, n = 0.0, 0
        for i, (X, y) in enumerate(self.train_loader, 1):
            pred = self.model(X)
            loss = self.criterion(pred, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
            n += 1
        return total / n

    def validate(self, epoch):
        self.model.eval()
        preds, ys = [], []
        with torch.no_grad():
            for X, y in self.val_loader:
                preds.append(self.model(X).reshape(-1))
                ys.append(y.reshape(-1))
        pred = torch.cat(preds) * self.y_info["std"] + self.y_info["mean"]
        y = torch.cat(ys) * self.y_info["std"] + self.y_info["mean"]
        rmse = torch.sqrt(((pred - y) ** 2).mean()).item()
        if rmse < self.trlog["best_res"]:
            self.trlog["best_res"], self.trlog["best_epoch"] = rmse, epoch
        return rmse


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--max_epoch", type=int, default=12)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight_decay", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main():
    args = get_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    N, Y = make_dataset(seed=args.seed)
    method = MLPMethod(args)
    method.fit(N, Y)
    print(f"best val rmse {method.trlog['best_res']:.4f} at epoch {method.trlog['best_epoch']}")


if __name__ == "__main__":
    main()
