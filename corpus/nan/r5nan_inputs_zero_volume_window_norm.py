"""LSTM stock-price predictor, a PyTorch port of jaungiers' "LSTM Neural Network for Time Series
Prediction": the DataLoader cuts the (Close, Volume) table into windows of seq_len days and
normalises every window by its first row (p / p0 - 1, per column), the network is three stacked
LSTM layers with dropout and a linear output predicting the normalised close of the last day.

Synthetic daily data: a random-walk close and a log-normal traded volume; on a few days (trading
halts) no shares changed hands.
"""
import json
import math

import numpy as np
import torch
import torch.nn as nn

np.random.seed(0)
torch.manual_seed(0)

configs = json.loads("""
{
    "data": {"columns": ["Close", "Volume"], "sequence_length": 50, "train_test_split": 0.85, "normalise": true},
    "training": {"epochs": 2, "batch_size": 32},
    "model": {"loss": "mse", "optimizer": "adam", "layers": [
        {"type": "lstm", "neurons": 100, "return_seq": true},
        {"type": "dropout", "rate": 0.2},
        {"type": "lstm", "neurons": 100, "return_seq": true},
        {"type": "lstm", "neurons": 100, "return_seq": false},
        {"type": "dropout", "rate": 0.2},
        {"type": "dense", "neurons": 1, "activation": "linear"}]}
}
""")


def make_market_data(n_days=1100):
    close = 100 * np.exp(np.cumsum(0.01 * np.random.randn(n_days)))
    volume = np.round(np.exp(13 + 0.4 * np.random.randn(n_days)))
    halts = np.random.choice(np.arange(100, n_days - 100), size=6, replace=False)
    volume[halts] = 0.0
    return {"Close": close, "Volume": volume}


class DataLoader():
    """A class for loading and transforming data for the lstm model"""

    def __init__(self, table, split, cols):
        data = np.stack([table[c] for c in cols], axis=1)
        i_split = int(len(data) * split)
        self.data_train = data[:i_split]
        self.data_test = data[i_split:]
        self.len_train = len(self.data_train)
        self.len_test = len(self.data_test)

    def get_train_data(self, seq_len, normalise):
        data_x = []
        data_y = []
        for i in range(self.len_train - seq_len):
            x, y = self._next_window(i, seq_len, normalise)
            data_x.append(x)
            data_y.append(y)
        return np.array(data_x), np.array(data_y)

    def get_test_data(self, seq_len, normalise):
        data_windows = np.array([self.data_test[i:i + seq_len] for i in range(self.len_test - seq_len)])
        data_windows = self.normalise_windows(data_windows, single_window=False) if normalise else data_windows
        return data_windows[:, :-1], data_windows[:, -1, [0]]

    def _next_window(self, i, seq_len, normalise):
        window = self.data_train[i:i + seq_len]
        window = self.normalise_windows(window, single_window=True)[0] if normalise else window
        x = window[:-1]
        y = window[-1, [0]]
        return x, y

    def normalise_windows(self, window_data, single_window=False):
        normalised_data = []
        window_data = [window_data] if single_window else window_data
        for window in window_data:
            normalised_window = []
            for col_i in range(window.shape[1]):
                normalised_col = window[:, col_i] / window[0, col_i] - 1
                normalised_window.append(normalised_col)
            normalised_window = np.array(normalised_window).T
            normalised_data.append(normalised_window)
        return np.array(normalised_data)


class Model(nn.Module):
    def __init__(self, n_features, layers):
        super().__init__()
        blocks, self.return_seq, in_dim = [], [], n_features
        for layer in layers:
            if layer["type"] == "lstm":
                blocks.append(nn.LSTM(in_dim, layer["neurons"], batch_first=True))
                in_dim = layer["neurons"]
            elif layer["type"] == "dropout":
                blocks.append(nn.Dropout(layer["rate"]))
            elif layer["type"] == "dense":
                blocks.append(nn.Linear(in_dim, layer["neurons"]))
            self.return_seq.append(layer.get("return_seq", True))
        self.layers = nn.ModuleList(blocks)

    def forward(self, x):
        for layer, return_seq in zip(self.layers, self.return_seq):
            if isinstance(layer, nn.LSTM):
                x, _ = layer(x)
                if not return_seq:
                    x = x[:, -1]
            else:
                x = layer(x)
        return x


def main():
    data = DataLoader(make_market_data(), configs["data"]["train_test_split"], configs["data"]["columns"])
    x, y = data.get_train_data(seq_len=configs["data"]["sequence_length"], normalise=configs["data"]["normalise"])
    x_test, y_test = data.get_test_data(seq_len=configs["data"]["sequence_length"], normalise=configs["data"]["normalise"])
    print(f"[Data] train windows {x.shape}, test windows {x_test.shape}")
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    x_test, y_test = torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test, dtype=torch.float32)

    model = Model(x.shape[2], configs["model"]["layers"])
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters())
    batch_size = configs["training"]["batch_size"]
    steps_per_epoch = math.ceil(len(x) / batch_size)
    print(f"[Model] Training Started: {configs['training']['epochs']} epochs, {batch_size} batch size")
    for epoch in range(configs["training"]["epochs"]):
        model.train()
        perm = torch.randperm(len(x))
        epoch_loss = 0.0
        for step in range(steps_per_epoch):
            idx = perm[step * batch_size:(step + 1) * batch_size]
            optimizer.zero_grad()
            loss = criterion(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            if step % 5 == 0:
                print(f"Epoch {epoch + 1} {step + 1}/{steps_per_epoch} - loss: {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            test_loss = criterion(model(x_test), y_test).item()
        print(f"Epoch {epoch + 1} - loss: {epoch_loss / steps_per_epoch:.4f} - test loss: {test_loss:.4f}")


if __name__ == "__main__":
    main()
