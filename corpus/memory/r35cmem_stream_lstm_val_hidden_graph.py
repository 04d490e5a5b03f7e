"""Next-step forecaster for long multichannel sensor streams: an LSTM reads each stream chunk
by chunk (64 parallel streams), carrying its hidden state forward, then is validated on a
longer held-out stream."""
import math
import torch
import torch.nn as nn

torch.manual_seed(0)

n_streams, n_channels = 64, 32
chunk_len = 100
n_train_chunks = 12
n_val_chunks = 40
hidden_size = 256


def make_stream(total_len):
    t = torch.arange(total_len, dtype=torch.float32)
    freqs = torch.rand(n_streams, n_channels, 1) * 0.05 + 0.01
    phase = torch.rand(n_streams, n_channels, 1) * 2 * math.pi
    x = torch.sin(freqs * t + phase) + 0.05 * torch.randn(n_streams, n_channels, total_len)
    return x.transpose(1, 2).transpose(0, 1).contiguous()  # (time, streams, channels)


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(n_channels, hidden_size)
        self.head = nn.Linear(hidden_size, n_channels)

    def forward(self, x, hidden):
        out, hidden = self.rnn(x, hidden)
        return self.head(out), hidden


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def init_hidden():
    return (torch.zeros(1, n_streams, hidden_size), torch.zeros(1, n_streams, hidden_size))


train_stream = make_stream(n_train_chunks * chunk_len + 1)
val_stream = make_stream(n_val_chunks * chunk_len + 1)
model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.MSELoss()

for epoch in range(2):
    model.train()
    hidden = init_hidden()
    total = 0.0
    for step in range(n_train_chunks):
        start = step * chunk_len
        inputs = train_stream[start:start + chunk_len]
        targets = train_stream[start + 1:start + chunk_len + 1]
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        preds, hidden = model(inputs, hidden)
        loss = criterion(preds, targets)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}  train mse {total / n_train_chunks:.4f}")

    model.eval()
    hidden = init_hidden()
    val_total = 0.0
    for step in range(n_val_chunks):
        start = step * chunk_len
        inputs = val_stream[start:start + chunk_len]
        targets = val_stream[start + 1:start + chunk_len + 1]
        preds, hidden = model(inputs, hidden)
        val_total += criterion(preds, targets).item()
        if step % 5 == 0:
            print(f"  val chunk {step:3d}  running mse {val_total / (step + 1):.4f}")
    print(f"epoch {epoch}  val mse {val_total / n_val_chunks:.4f}")
