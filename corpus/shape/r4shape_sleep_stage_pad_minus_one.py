"""Sleep staging from the RR-interval (RRI) signal of a night's ECG, DCNN-SHHS style.

Every 30-s epoch of the night is classified (wake, light, deep, REM) from a 64-s window of the
RRI signal centred on it. Recordings are padded to a fixed number of epochs so whole nights can
be batched; a per-window CNN learns window features and a dilated temporal CNN over the night
turns them into per-epoch stage scores. Synthetic nights: each stage modulates the RRI level,
its variability and a respiratory-band oscillation.
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

FREQ = 2            # RRI resampled at 2 Hz
EPOCH_LENGTH = 64   # seconds of signal seen for each 30-s epoch
N_EPOCHS = 240      # recordings are filled to 2 hours (240 epochs)


def simulate_night(rng):
    n_epochs = int(rng.integers(150, 240))
    slp = np.zeros(n_epochs, dtype=np.int64)
    stage = 0
    for i in range(n_epochs):
        if rng.random() < 0.1:
            stage = int(rng.integers(0, 4))
        slp[i] = stage
    level = np.array([0.75, 0.85, 0.95, 0.80])[slp]
    spread = np.array([0.06, 0.03, 0.015, 0.05])[slp]
    t = np.arange(n_epochs * 30 * FREQ) / FREQ
    base = np.repeat(level, 30 * FREQ) + np.repeat(spread, 30 * FREQ) * rng.standard_normal(t.size)
    resp = np.repeat(np.array([0.005, 0.02, 0.04, 0.01])[slp], 30 * FREQ) * np.sin(2 * np.pi * 0.25 * t)
    return (base + resp).astype(np.float32), slp


def fill_signal(signal, slp, freq=FREQ, epoch_length=EPOCH_LENGTH, normalize=True):
    if normalize:
        signal = (signal - signal.mean()) / signal.std()
    filled_length = 30 * N_EPOCHS + epoch_length - 30
    half_left = (epoch_length - 30) // 2
    real_length = signal.size // freq
    start_nepoch = ((filled_length - real_length) // 2 - half_left) // 30
    start_i = start_nepoch * 30 + half_left
    filled_signal = np.zeros(filled_length * freq, dtype=np.float32)
    filled_signal[start_i * freq: start_i * freq + real_length * freq] = signal

    filled_slp = np.full(N_EPOCHS, -1, dtype=np.int64)
    filled_slp[start_nepoch: start_nepoch + slp.size] = slp
    return filled_signal, filled_slp


def reshape_tensor(signal, slp, freq=FREQ, epoch_length=EPOCH_LENGTH):
    signal, slp = fill_signal(signal, slp, freq, epoch_length)
    signal = torch.from_numpy(signal).float()
    slp = torch.from_numpy(slp)
    signal = signal.unfold(0, epoch_length * freq, 30 * freq)
    return signal, slp


class NightDataset(Dataset):
    def __init__(self, n_nights, seed):
        rng = np.random.default_rng(seed)
        self.nights = [simulate_night(rng) for _ in range(n_nights)]

    def __len__(self):
        return len(self.nights)

    def __getitem__(self, idx):
        rri, slp = self.nights[idx]
        return reshape_tensor(rri, slp)


def padding_same(kernel_size=3, dilation=1, stride=1):
    return (dilation * (kernel_size - 1) + 1 - stride) // 2


class ResBlock(nn.Module):
    def __init__(self, num_windows_features=64, kernel_size=7, dilations=(2, 4, 8, 16)):
        super().__init__()
        layers = []
        for d in dilations:
            layers += [nn.LeakyReLU(0.15),
                       nn.Conv1d(num_windows_features, num_windows_features, kernel_size,
                                 dilation=d, padding=padding_same(kernel_size, d)),
                       nn.Dropout(0.2)]
        self.cnn = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.cnn(x)


class DCNN_classifier(nn.Module):
    def __init__(self, w1=EPOCH_LENGTH * FREQ, num_windows_features=64, channels=(8, 16, 32), n_classes=4):
        super().__init__()
        self.w1 = w1
        layers = [nn.Conv1d(1, channels[0], 1), nn.LeakyReLU(0.15), nn.BatchNorm1d(channels[0])]
        for i in range(len(channels) - 1):
            layers += [nn.Conv1d(channels[i], channels[i + 1], 3, padding=padding_same(3)),
                       nn.MaxPool1d(2), nn.LeakyReLU(0.15), nn.BatchNorm1d(channels[i + 1])]
        self.signallearning_rri = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(w1 // 2 ** (len(channels) - 1) * channels[-1], num_windows_features)
        self.classifier = nn.Sequential(ResBlock(num_windows_features), ResBlock(num_windows_features),
                                        nn.Conv1d(num_windows_features, n_classes, 1))

    def forward(self, rri):
        batchsize, nwindows, w1 = rri.shape
        assert w1 == self.w1, 'the input length of RRI is not the same with your configuration of NN'
        out = self.signallearning_rri(rri.reshape(-1, 1, w1))
        out = self.linear(self.flatten(out))
        out = out.reshape(batchsize, nwindows, -1).transpose(1, 2).contiguous()
        out = self.classifier(out)
        return out.transpose(1, 2).contiguous().reshape(batchsize * nwindows, -1)


if __name__ == "__main__":
    train_loader = DataLoader(NightDataset(64, seed=1), batch_size=4, shuffle=True)
    test_loader = DataLoader(NightDataset(16, seed=2), batch_size=4)

    model = DCNN_classifier()
    loss = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(10):
        model.train()
        total, n = 0.0, 0
        for i, (rri, slp) in enumerate(train_loader):
            out = model(rri)
            L = loss(out, slp.reshape(-1))
            optimizer.zero_grad()
            L.backward()
            optimizer.step()
            total += L.item()
            n += 1
            if i % 5 == 0:
                print(f"epoch {epoch} batch {i}/{len(train_loader)} loss {L.item():.4f}")

        model.eval()
        correct, count = 0, 0
        with torch.no_grad():
            for rri, slp in test_loader:
                pred = model(rri).argmax(1)
                slp = slp.reshape(-1)
                valid = slp >= 0
                correct += (pred[valid] == slp[valid]).sum().item()
                count += valid.sum().item()
        print(f"epoch {epoch}: train loss {total / n:.4f}  test accuracy {correct / count:.3f}")
