"""Next-value forecasting of noisy sine waves with a small mLSTM (xLSTM matrix-memory cell).

Each sample is a window of 10 readings; the model reads the window step by step and
predicts the reading that follows it.
"""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)

SEQ_LEN = 10
HIDDEN = 24
BATCH = 4


def make_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    freq = 0.25 + 0.5 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    t = torch.arange(SEQ_LEN + 1, dtype=torch.float32)[None]
    series = torch.sin(freq * t + phase) + 0.05 * torch.randn(n, SEQ_LEN + 1, generator=g)
    return series[:, :SEQ_LEN, None], series[:, SEQ_LEN:]


class mLSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.W_q = nn.Linear(input_size + hidden_size, hidden_size)
        self.W_k = nn.Linear(input_size + hidden_size, hidden_size)
        self.W_v = nn.Linear(input_size + hidden_size, hidden_size)
        self.W_o = nn.Linear(input_size + hidden_size, hidden_size)
        self.w_i = nn.Linear(input_size + hidden_size, 1)
        self.w_f = nn.Linear(input_size + hidden_size, 1)
        nn.init.constant_(self.w_f.bias, 3.0)

    def forward(self, x, state):
        h, C, n, m = state
        z = torch.cat([x, h])
        q = self.W_q(z)
        k = self.W_k(z) / math.sqrt(self.hidden_size)
        v = self.W_v(z)
        o = torch.sigmoid(self.W_o(z))
        i_tilde, f_tilde = self.w_i(z), self.w_f(z)
        m_new = torch.maximum(f_tilde + m, i_tilde)
        i = torch.exp(i_tilde - m_new)
        f = torch.exp(f_tilde + m - m_new)
        C = f * C + i * torch.outer(v, k)
        n = f * n + i * k
        h = o * (C @ q) / torch.clamp(torch.abs(n @ q), min=1.0)
        return h, (h, C, n, m_new)


class mLSTM(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.cell = mLSTMCell(input_size, hidden_size)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, seq):
        hs = self.cell.hidden_size
        state = (torch.zeros(hs), torch.zeros(hs, hs), torch.zeros(hs), torch.zeros(1))
        outputs = []
        for x in seq:
            h, state = self.cell(x, state)
            outputs.append(self.fc(h))
        return torch.stack(outputs)


def main():
    x_train, y_train = make_windows(480, seed=1)
    x_val, y_val = make_windows(160, seed=2)
    model = mLSTM(1, HIDDEN, 1)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(x_train))
        total = 0.0
        for b in range(0, len(perm), BATCH):
            loss = 0.0
            for idx in perm[b:b + BATCH]:
                y_pred = model(x_train[idx])
                y_true = y_train[idx].view(1, 1)
                loss += criterion(y_pred, y_true)
            loss = loss / BATCH
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        with torch.no_grad():
            forecasts = torch.stack([model(x)[-1] for x in x_val])
            val_mse = ((forecasts - y_val) ** 2).mean().item()
        print(f"epoch {epoch} train loss {total / (len(perm) // BATCH):.4f} val forecast mse {val_mse:.4f}")


if __name__ == "__main__":
    main()
