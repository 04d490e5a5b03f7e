"""Time-series extrinsic regression with a fully convolutional network (FCN, Wang et al. 2017).

Modelled on sktime's torch deep-learning regressors: a BaseDeepRegressorTorch that builds the
network, the dataloader, the criterion and the optimizer and runs the epochs, and an
FCNRegressorTorch on top of it (three Conv1d + BatchNorm + ReLU blocks, global average pooling,
a linear output unit). The task: two-channel sensor recordings (vibration and current of a
pump) from which the bearing wear index is to be predicted; the recordings are synthetic, the
wear index sets the amplitude and the frequency of a fault tone riding on the vibration signal.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


# ---------------------------------------------------------------- data
def make_pump_recordings(n, length=72, seed=0):
    rng = np.random.RandomState(seed)
    t = np.arange(length) / length
    wear = rng.uniform(0.0, 4.0, size=n)
    X = np.zeros((n, 2, length), dtype=np.float32)
    for i in range(n):
        phase = rng.uniform(0, 2 * np.pi)
        base = np.sin(2 * np.pi * 5 * t + phase)
        fault = 0.25 * wear[i] * np.sin(2 * np.pi * (12 + 2 * wear[i]) * t + rng.uniform(0, 2 * np.pi))
        X[i, 0] = base + fault + 0.2 * rng.randn(length)
        X[i, 1] = 1.0 + 0.1 * wear[i] + 0.3 * np.sin(2 * np.pi * 5 * t + phase + 0.5) + 0.2 * rng.randn(length)
    return X, wear.astype(np.float32)


class _TorchDataset(Dataset):
    def __init__(self, X, y=None):
        self.X = torch.from_numpy(X).float()
        self.y = None if y is None else torch.from_numpy(y).float()

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        inputs = {"X": self.X[i]}
        if self.y is None:
            return inputs
        return inputs, self.y[i]


# ---------------------------------------------------------------- networks
class FCNNetworkTorch(nn.Module):
    def __init__(self, input_size, num_classes, n_filters=(128, 256, 128), kernel_sizes=(8, 5, 3)):
        super().__init__()
        layers = []
        in_ch = input_size
        for out_ch, k in zip(n_filters, kernel_sizes):
            layers += [nn.Conv1d(in_ch, out_ch, k, padding="same"), nn.BatchNorm1d(out_ch), nn.ReLU()]
            in_ch = out_ch
        self.conv_layers = nn.Sequential(*layers)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, X):
        h = self.conv_layers(X)
        h = h.mean(dim=-1)
        return self.fc(h)


# ---------------------------------------------------------------- estimators
class BaseDeepRegressorTorch:
    def __init__(self, num_epochs=8, batch_size=16, lr=1e-3, verbose=True, random_state=0):
        self.num_epochs = num_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.verbose = verbose
        self.random_state = random_state

    def _build_network(self, X):
        raise NotImplementedError

    def _build_dataloader(self, X, y=None, shuffle=False):
        return DataLoader(_TorchDataset(X, y), batch_size=self.batch_size, shuffle=shuffle)

    def fit(self, X, y):
        torch.manual_seed(self.random_state)
        self.network = self._build_network(X)
        self._criterion = nn.MSELoss()
        self._optimizer = torch.optim.Adam(self.network.parameters(), lr=self.lr)
        dataloader = self._build_dataloader(X, y, shuffle=True)
        self.history_ = []
        t0 = time.time()
        for epoch in range(self.num_epochs):
            epoch_loss = self._run_epoch(epoch, dataloader)
            self.history_.append(epoch_loss)
            if self.verbose:
                print("Epoch {}/{}: train loss {:.4f}  ({:.1f}s)".format(
                    epoch + 1, self.num_epochs, epoch_loss, time.time() - t0))
        return self

    def _run_epoch(self, epoch, dataloader):
        self.network.train()
        losses = []
        for inputs, outputs in dataloader:
            self._optimizer.zero_grad()
            y_pred = self.network(**inputs)
            loss = self._criterion(y_pred, outputs)
            loss.backward()
            self._optimizer.step()
            losses.append(loss.item())
        return float(np.mean(losses))

    def predict(self, X):
        self.network.eval()
        preds = []
        with torch.no_grad():
            for inputs in self._build_dataloader(X):
                preds.append(self.network(**inputs).squeeze(-1))
        return torch.cat(preds).numpy()


class FCNRegressorTorch(BaseDeepRegressorTorch):
    def _build_network(self, X):
        return FCNNetworkTorch(input_size=X.shape[1], num_classes=1)


def mean_squared_error(y_true, y_pred):
    return float(np.mean((y_true - y_pred) ** 2))


def r2_score(y_true, y_pred):
    return 1.0 - np.sum((y_true - y_pred) ** 2) / np.sum((y_true - y_true.mean()) ** 2)


X_train, y_train = make_pump_recordings(400, seed=1)
X_test, y_test = make_pump_recordings(160, seed=2)
print("X_train {}, y_train {}, X_test {}".format(X_train.shape, y_train.shape, X_test.shape))

regressor = FCNRegressorTorch(num_epochs=6, batch_size=16, lr=1e-3)
regressor.fit(X_train, y_train)

y_pred = regressor.predict(X_test)
print("test MSE {:.4f}  (variance of y_test {:.4f})  R^2 {:.3f}".format(
    mean_squared_error(y_test, y_pred), y_test.var(), r2_score(y_test, y_pred)))
print("predictions: min {:.3f} max {:.3f} std {:.3f}".format(y_pred.min(), y_pred.max(), y_pred.std()))
