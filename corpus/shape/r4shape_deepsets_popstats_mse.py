"""DeepSets: estimate a population statistic from a set of samples (PopStats task).

Each example is a set of 2-D points drawn from a Gaussian whose covariance is rotated by an
angle t; the target is the entropy of the first coordinate's marginal, a function of t.
A permutation-invariant network (per-point feature extractor, sum pooling, regressor) learns
to read the statistic off the set. Sets are batched by a small iterator, as in the original
code.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

np.random.seed(0)
torch.manual_seed(0)


def marginal_entropy(t, lam=0.1):
    # covariance R(t) diag(1, lam) R(t)^T; entropy of the first coordinate's marginal
    var_x = np.cos(t) ** 2 + lam * np.sin(t) ** 2
    return 0.5 * np.log(2 * math.pi * math.e * var_x)


def generate(n_sets, set_size=32, lam=0.1):
    t = np.random.uniform(0, math.pi, size=n_sets)
    z = np.random.randn(n_sets, set_size, 2) * np.array([1.0, math.sqrt(lam)])
    c, s = np.cos(t)[:, None], np.sin(t)[:, None]
    x = np.stack([c * z[..., 0] - s * z[..., 1], s * z[..., 0] + c * z[..., 1]], axis=-1)
    return x.astype(np.float32), marginal_entropy(t, lam).astype(np.float32), t


class DataIterator(object):
    def __init__(self, X, y, batch_size, shuffle=False):
        self.X, self.y = X, y
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.d = X.shape[-1]

    def get_iterator(self):
        idx = np.random.permutation(len(self.y)) if self.shuffle else np.arange(len(self.y))
        for i in range(0, len(idx), self.batch_size):
            j = idx[i:i + self.batch_size]
            yield self.X[j], self.y[j]


class DeepSet(nn.Module):
    def __init__(self, in_features, set_features=50):
        super(DeepSet, self).__init__()
        self.feature_extractor = nn.Sequential(
            nn.Linear(in_features, 50), nn.ELU(inplace=True),
            nn.Linear(50, 100), nn.ELU(inplace=True),
            nn.Linear(100, set_features))
        self.regressor = nn.Sequential(
            nn.Linear(set_features, 30), nn.ELU(inplace=True),
            nn.Linear(30, 30), nn.ELU(inplace=True),
            nn.Linear(30, 10), nn.ELU(inplace=True),
            nn.Linear(10, 1))

    def forward(self, input):
        x = self.feature_extractor(input)
        x = x.sum(dim=1)
        return self.regressor(x)


class Trainer(object):
    def __init__(self, in_dims, num_epochs=6):
        self.model = DeepSet(in_dims)
        self.l1 = nn.L1Loss()
        self.l2 = nn.MSELoss()
        self.optim = optim.Adam(self.model.parameters(), lr=0.001)
        self.num_epochs = num_epochs

    def fit(self, train, valid):
        train_loss = 0.0
        best_mse = 1.0e6
        step = 0
        for j in range(self.num_epochs):
            for X, y in train.get_iterator():
                self.optim.zero_grad()
                y_pred = self.model(torch.from_numpy(X))
                loss = self.l2(y_pred, torch.from_numpy(y))
                train_loss = 0.9 * train_loss + 0.1 * loss.item()
                loss.backward()
                self.optim.step()
                step += 1
                if step % 10 == 0:
                    print('step {0} Train loss: {1:.4f}'.format(step, train_loss))
            test_mae, test_mse = self.evaluate(valid)
            best_mse = min(best_mse, test_mse)
            print('After epoch {0} Test MAE: {1:0.4g} Test MSE: {2:0.4g} Best MSE: {3:0.4g} Train Loss: {4:0.4f}'.format(
                j + 1, test_mae, test_mse, best_mse, train_loss))
        return best_mse

    def evaluate(self, test):
        counts, sum_mae, sum_mse = 0, 0.0, 0.0
        with torch.no_grad():
            for X, y in test.get_iterator():
                counts += 1
                y_pred = self.model(torch.from_numpy(X))
                sum_mae += self.l1(y_pred, torch.from_numpy(y)).item()
                sum_mse += self.l2(y_pred, torch.from_numpy(y)).item()
        return sum_mae / counts, sum_mse / counts


if __name__ == '__main__':
    X_train, y_train, _ = generate(4096)
    X_val, y_val, _ = generate(512)
    train = DataIterator(X_train, y_train, 128, shuffle=True)
    valid = DataIterator(X_val, y_val, 128)
    print('Loaded dataset: {0} train sets, {1} validation sets, d = {2}'.format(len(y_train), len(y_val), train.d))
    print('variance of the statistic on the validation sets: {0:.4f}'.format(y_val.var()))

    t = Trainer(train.d)
    best = t.fit(train, valid)
    print('Best validation MSE: {0:0.4g}'.format(best))
