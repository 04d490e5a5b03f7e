"""Speech emotion recognition on RAVDESS-style clips with two parallel 2D-CNN blocks and a
Transformer-encoder block over the log-mel spectrogram ("Parallel is All You Want" notebook),
rewritten as a script for my own recordings.

The clips here are synthetic voiced utterances (harmonic source, emotion-dependent pitch,
loudness modulation and spectral tilt) at 8 kHz; each is padded to a fixed length, turned into a
40-band log-mel spectrogram and classified into the 8 RAVDESS emotions.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

sample_rate = 8000
DURATION = 5
emotions_dict = {0: "surprised", 1: "neutral", 2: "calm", 3: "happy", 4: "sad", 5: "angry",
                 6: "fearful", 7: "disgust"}


def synth_utterance(emotion, rng):
    f0 = 110 + 20 * emotion + rng.normal(0, 6)
    n = int(sample_rate * rng.uniform(2.2, 3.4))
    t = np.arange(n) / sample_rate
    f0_track = f0 * (1 + 0.04 * np.sin(2 * np.pi * rng.uniform(0.5, 1.5) * t))
    phase = 2 * np.pi * np.cumsum(f0_track) / sample_rate
    tilt = 0.35 + 0.08 * ((emotion * 3) % 8)
    voice = sum((tilt ** k) * np.sin((k + 1) * phase) for k in range(6))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * (1.5 + 0.8 * ((emotion * 5) % 8)) * t) ** 2
    return 0.3 * voice * envelope + rng.normal(0, 0.02, size=n)


def mel_filterbank(n_fft, n_mels, sr):
    def hz_to_mel(f):
        return 2595 * np.log10(1 + f / 700)

    def mel_to_hz(m):
        return 700 * (10 ** (m / 2595) - 1)

    mel_points = np.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2)
    bins = np.floor((n_fft + 1) * mel_to_hz(mel_points) / sr).astype(int)
    fb = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(1, n_mels + 1):
        left, centre, right = bins[m - 1], bins[m], bins[m + 1]
        for k in range(left, centre):
            fb[m - 1, k] = (k - left) / max(centre - left, 1)
        for k in range(centre, right):
            fb[m - 1, k] = (right - k) / max(right - centre, 1)
    return torch.tensor(fb, dtype=torch.float32)


MEL_FB = mel_filterbank(256, 40, sample_rate)


def feature_melspectrogram(waveforms, fft=256, hop=128, mels=40):
    spec = torch.stft(torch.tensor(waveforms, dtype=torch.float32), n_fft=fft, hop_length=hop,
                      window=torch.hann_window(fft), center=True, return_complex=True)
    power = spec.abs() ** 2
    mel = torch.matmul(MEL_FB[:mels], power)
    return 10 * torch.log10(mel + 1e-10)


def load_data(n_per_emotion, rng):
    waveforms, labels = [], []
    for emotion in range(8):
        for _ in range(n_per_emotion):
            waveform = synth_utterance(emotion, rng)
            waveform_homo = np.zeros(int(sample_rate * DURATION))
            waveform_homo[:len(waveform)] = waveform[:len(waveform_homo)]
            waveforms.append(waveform_homo)
            labels.append(emotion)
    return np.stack(waveforms), np.array(labels)


rng = np.random.default_rng(0)
waveforms, emotions = load_data(40, rng)
features = feature_melspectrogram(waveforms)
print(f"Features (mel spectrogram) shape: {features.shape[1]} mels x {features.shape[2]} time steps")

X = features.unsqueeze(1)
X = (X - X.mean()) / X.std()
y = torch.tensor(emotions)
perm = torch.randperm(len(y))
X, y = X[perm], y[perm]
n_train = int(0.8 * len(y))
train_loader = DataLoader(TensorDataset(X[:n_train], y[:n_train]), batch_size=32, shuffle=True)
valid_X, valid_y = X[n_train:], y[n_train:]


def conv_block():
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, stride=1, padding=1),
        nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2), nn.Dropout(p=0.3),
        nn.Conv2d(16, 32, kernel_size=3, stride=1, padding=1),
        nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(kernel_size=4, stride=4), nn.Dropout(p=0.3),
        nn.Conv2d(32, 64, kernel_size=3, stride=1, padding=1),
        nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(kernel_size=4, stride=4), nn.Dropout(p=0.3),
    )


class parallel_all_you_want(nn.Module):
    def __init__(self, num_emotions):
        super().__init__()
        # transformer block: (1, 40, 188) -> maxpool [2, 4] -> 20 mel x 47 time
        self.transformer_maxpool = nn.MaxPool2d(kernel_size=[2, 4], stride=[2, 4])
        transformer_layer = nn.TransformerEncoderLayer(d_model=20, nhead=4, dim_feedforward=128,
                                                       dropout=0.4, activation="relu")
        self.transformer_encoder = nn.TransformerEncoder(transformer_layer, num_layers=4)
        # conv blocks: (1, 40, 188) -> (16, 20, 94) -> (32, 5, 23) -> (64, 1, 5)
        self.conv2Dblock1 = conv_block()
        self.conv2Dblock2 = conv_block()
        # 64*1*5 = 320 per conv block, 20 from the transformer
        self.fc1_linear = nn.Linear(320 * 2 + 20, num_emotions)
        self.softmax_out = nn.Softmax(dim=1)

    def forward(self, x):
        conv2d_embedding1 = torch.flatten(self.conv2Dblock1(x), start_dim=1)
        conv2d_embedding2 = torch.flatten(self.conv2Dblock2(x), start_dim=1)
        x_maxpool = self.transformer_maxpool(x)
        x_maxpool_reduced = torch.squeeze(x_maxpool, 1)
        x = x_maxpool_reduced.permute(2, 0, 1)
        transformer_output = self.transformer_encoder(x)
        transformer_embedding = torch.mean(transformer_output, dim=0)
        complete_embedding = torch.cat([conv2d_embedding1, conv2d_embedding2, transformer_embedding], dim=1)
        output_logits = self.fc1_linear(complete_embedding)
        output_softmax = self.softmax_out(output_logits)
        return output_logits, output_softmax


model = parallel_all_you_want(num_emotions=len(emotions_dict))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-3, momentum=0.8)


def make_train_step(model, criterion, optimizer):
    def train_step(X, Y):
        output_logits, output_softmax = model(X)
        predictions = torch.argmax(output_softmax, dim=1)
        accuracy = torch.sum(Y == predictions) / float(len(Y))
        loss = criterion(output_logits, Y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item(), accuracy * 100
    return train_step


def make_validate_fnc(model, criterion):
    def validate(X, Y):
        with torch.no_grad():
            model.eval()
            output_logits, output_softmax = model(X)
            predictions = torch.argmax(output_softmax, dim=1)
            accuracy = torch.sum(Y == predictions) / float(len(Y))
            loss = criterion(output_logits, Y)
        return loss.item(), accuracy * 100
    return validate


train_step = make_train_step(model, criterion, optimizer)
validate = make_validate_fnc(model, criterion)

for epoch in range(6):
    model.train()
    epoch_acc, epoch_loss = 0.0, 0.0
    for X_batch, y_batch in train_loader:
        loss, acc = train_step(X_batch, y_batch)
        epoch_acc += acc.item() * len(y_batch) / n_train
        epoch_loss += loss * len(y_batch) / n_train
    valid_loss, valid_acc = validate(valid_X, valid_y)
    print(f"Epoch {epoch} --- loss:{epoch_loss:.3f}, Epoch accuracy:{epoch_acc:.2f}%, "
          f"Validation loss:{valid_loss:.3f}, Validation accuracy:{valid_acc:.2f}%")
