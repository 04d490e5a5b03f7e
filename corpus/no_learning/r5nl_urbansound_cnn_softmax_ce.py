"""Urban sound classifier from the "PyTorch for Audio + Music Processing" series: a dataset that
loads 1 s clips at 22050 Hz, pads/cuts them and turns them into 64-band mel spectrograms; a CNN
with four conv blocks, a flatten, a linear layer and a softmax; CrossEntropyLoss and Adam.

The clips are synthetic here (ten classes of tones, chirps and noise bursts); the mel
spectrogram is computed with torch.stft and a triangular mel filterbank, as
torchaudio.transforms.MelSpectrogram(sample_rate=22050, n_fft=1024, hop_length=512, n_mels=64)
does.
"""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

BATCH_SIZE = 16
EPOCHS = 6
LEARNING_RATE = 0.001
SAMPLE_RATE = 22050
NUM_SAMPLES = 22050


class MelSpectrogram(nn.Module):
    def __init__(self, sample_rate, n_fft, hop_length, n_mels):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))
        hz_to_mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)
        mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2)
        hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
        freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1)
        down = (freqs[:, None] - hz[None, :-2]) / (hz[1:-1] - hz[:-2])
        up = (hz[None, 2:] - freqs[:, None]) / (hz[2:] - hz[1:-1])
        self.register_buffer("fb", torch.clamp(torch.minimum(down, up), min=0.0))

    def forward(self, signal):
        spec = torch.stft(signal, self.n_fft, self.hop_length, window=self.window, return_complex=True)
        power = spec.abs() ** 2
        return torch.matmul(power.transpose(-1, -2), self.fb).transpose(-1, -2)


class UrbanSoundDataset(Dataset):
    def __init__(self, n_clips, transformation, target_sample_rate, num_samples, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n_clips,), generator=g)
        self.lengths = torch.randint(num_samples // 2, num_samples + num_samples // 4, (n_clips,), generator=g)
        self.seeds = torch.randint(0, 2 ** 30, (n_clips,), generator=g)
        self.transformation = transformation
        self.target_sample_rate = target_sample_rate
        self.num_samples = num_samples

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        label = int(self.labels[index])
        signal = self._synthesize(label, int(self.lengths[index]), int(self.seeds[index]))
        signal = self._cut_if_necessary(signal)
        signal = self._right_pad_if_necessary(signal)
        signal = self.transformation(signal)
        return signal, label

    def _synthesize(self, label, length, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(length) / self.target_sample_rate
        f0 = 150.0 * (1.45 ** label) * (1 + 0.03 * torch.randn(1, generator=g))
        if label % 3 == 0:
            wave = torch.sin(2 * math.pi * f0 * t) + 0.5 * torch.sin(4 * math.pi * f0 * t)
        elif label % 3 == 1:
            wave = torch.sin(2 * math.pi * f0 * t * (1 + 0.5 * t))
        else:
            wave = torch.randn(length, generator=g) * torch.sin(2 * math.pi * f0 * t) ** 2
        envelope = torch.sigmoid(10 * torch.sin(2 * math.pi * (1 + label % 4) * t + torch.rand(1, generator=g) * 6))
        amp = 0.2 + 0.5 * torch.rand(1, generator=g)
        return (amp * envelope * wave + 0.01 * torch.randn(length, generator=g)).unsqueeze(0)

    def _cut_if_necessary(self, signal):
        if signal.shape[1] > self.num_samples:
            signal = signal[:, :self.num_samples]
        return signal

    def _right_pad_if_necessary(self, signal):
        length_signal = signal.shape[1]
        if length_signal < self.num_samples:
            num_missing_samples = self.num_samples - length_signal
            signal = torch.nn.functional.pad(signal, (0, num_missing_samples))
        return signal


class CNNNetwork(nn.Module):

    def __init__(self):
        super().__init__()
        # 4 conv blocks / flatten / linear / softmax
        self.conv1 = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 2), nn.ReLU(), nn.MaxPool2d(kernel_size=2))
        self.conv2 = nn.Sequential(nn.Conv2d(16, 32, 3, 1, 2), nn.ReLU(), nn.MaxPool2d(kernel_size=2))
        self.conv3 = nn.Sequential(nn.Conv2d(32, 64, 3, 1, 2), nn.ReLU(), nn.MaxPool2d(kernel_size=2))
        self.conv4 = nn.Sequential(nn.Conv2d(64, 128, 3, 1, 2), nn.ReLU(), nn.MaxPool2d(kernel_size=2))
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(128 * 5 * 4, 10)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, input_data):
        x = self.conv1(input_data)
        x = self.conv2(x)
        x = self.conv3(x)
        x = self.conv4(x)
        x = self.flatten(x)
        logits = self.linear(x)
        predictions = self.softmax(logits)
        return predictions


def create_data_loader(train_data, batch_size):
    return DataLoader(train_data, batch_size=batch_size, shuffle=True)


def train_single_epoch(model, data_loader, loss_fn, optimiser):
    correct, total = 0, 0
    for input, target in data_loader:
        prediction = model(input)
        loss = loss_fn(prediction, target)

        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        correct += (prediction.argmax(1) == target).sum().item()
        total += len(target)

    print(f"loss: {loss.item()}  train accuracy: {correct / total:.3f}")


def train(model, data_loader, loss_fn, optimiser, epochs):
    for i in range(epochs):
        print(f"Epoch {i+1}")
        train_single_epoch(model, data_loader, loss_fn, optimiser)
        print("---------------------------")
    print("Finished training")


if __name__ == "__main__":
    mel_spectrogram = MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=1024, hop_length=512, n_mels=64)
    usd = UrbanSoundDataset(320, mel_spectrogram, SAMPLE_RATE, NUM_SAMPLES, seed=0)
    print(f"There are {len(usd)} samples in the dataset; input shape {tuple(usd[0][0].shape)}")
    train_dataloader = create_data_loader(usd, BATCH_SIZE)

    cnn = CNNNetwork()
    print(cnn)
    loss_fn = nn.CrossEntropyLoss()
    optimiser = torch.optim.Adam(cnn.parameters(), lr=LEARNING_RATE)
    train(cnn, train_dataloader, loss_fn, optimiser, EPOCHS)
