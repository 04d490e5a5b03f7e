"""CRNN action recognition: a per-frame CNN encoder followed by an LSTM decoder.

Each clip is 8 frames of a small bright object moving in one of four directions
(left, right, up, down) from a random starting point; the class is the direction of motion.
The CNN encodes every frame to a feature vector, the LSTM reads the sequence of frame
features and the output of the last time step is classified.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_FRAMES = 8
IMG = 24
N_CLASSES = 4
BATCH_SIZE = 32
EPOCHS = 6


class MovingObjectClips(Dataset):
    def __init__(self, n_clips, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n_clips,), generator=g)
        self.clips = torch.zeros(n_clips, N_FRAMES, 1, IMG, IMG)
        step = 2
        for i in range(n_clips):
            y0, x0 = torch.randint(4, IMG - 8, (2,), generator=g).tolist()
            dy, dx = [(0, -step), (0, step), (-step, 0), (step, 0)][self.labels[i]]
            for t in range(N_FRAMES):
                y = min(max(y0 + dy * (t - N_FRAMES // 2) // 2, 0), IMG - 4)
                x = min(max(x0 + dx * (t - N_FRAMES // 2) // 2, 0), IMG - 4)
                self.clips[i, t, 0, y:y + 4, x:x + 4] = 1.0
        self.clips += 0.1 * torch.randn(self.clips.shape, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.clips[idx], self.labels[idx]


class EncoderCNN(nn.Module):
    def __init__(self, embed_dim=64):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(32 * 6 * 6, embed_dim)

    def forward(self, x_3d):
        cnn_embed_seq = []
        for t in range(x_3d.size(1)):
            x = self.conv(x_3d[:, t])
            x = x.view(x.size(0), -1)
            cnn_embed_seq.append(F.relu(self.fc(x)))
        return torch.stack(cnn_embed_seq, dim=1)


class DecoderRNN(nn.Module):
    def __init__(self, rnn_input_size=64, h_rnn=64, num_classes=N_CLASSES):
        super().__init__()
        self.rnn_input_size = rnn_input_size
        self.LSTM = nn.LSTM(input_size=rnn_input_size, hidden_size=h_rnn, num_layers=1)
        self.fc1 = nn.Linear(h_rnn, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x_rnn):
        x_rnn = x_rnn.view(x_rnn.size(1), x_rnn.size(0), self.rnn_input_size)
        rnn_out, (h_n, h_c) = self.LSTM(x_rnn, None)
        x = F.relu(self.fc1(rnn_out[-1]))
        return self.fc2(x)


train_loader = DataLoader(MovingObjectClips(512, 1), batch_size=BATCH_SIZE, shuffle=True)
valid_loader = DataLoader(MovingObjectClips(256, 2), batch_size=BATCH_SIZE)

cnn_encoder = EncoderCNN()
rnn_decoder = DecoderRNN()
params = list(cnn_encoder.parameters()) + list(rnn_decoder.parameters())
optimizer = torch.optim.Adam(params, lr=2e-3)

for epoch in range(EPOCHS):
    cnn_encoder.train()
    rnn_decoder.train()
    losses = []
    for X, y in train_loader:
        output = rnn_decoder(cnn_encoder(X))
        loss = F.cross_entropy(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    cnn_encoder.eval()
    rnn_decoder.eval()
    correct = 0
    with torch.no_grad():
        for X, y in valid_loader:
            correct += (rnn_decoder(cnn_encoder(X)).argmax(1) == y).sum().item()
    print(f"epoch {epoch + 1}: train loss {sum(losses) / len(losses):.4f}  "
          f"valid acc {correct / len(valid_loader.dataset):.3f}")
