"""WaveNet classifier for ion-channel recordings: predict the number of open channels
at the end of a window of the current signal (Liverpool ion switching style data)."""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(0)


def make_recording(n=12000, max_open=10):
    open_channels = np.zeros(n, dtype=np.int64)
    state = 3
    for t in range(n):
        if np.random.rand() < 0.05:
            state = int(np.clip(state + np.random.choice([-2, -1, 1, 2]), 0, max_open))
        open_channels[t] = state
    signal = 1.2 * open_channels - 2.5 + 0.35 * np.random.randn(n)
    return signal.astype(np.float32), open_channels


class TimeseriesDataset(torch.utils.data.Dataset):
    def __init__(self, signal, labels, seq_len=50):
        super().__init__()
        self.signal = signal / np.abs(signal).max()
        self.labels = labels
        self.seq_len = seq_len

    def __len__(self):
        return len(self.signal) - self.seq_len - 1

    def __getitem__(self, index):
        x = self.signal[index:index + self.seq_len]
        y = self.labels[index + self.seq_len - 1]
        return torch.from_numpy(x), torch.tensor(y)


class CausalDilatedConv1d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, bias=False)

    def forward(self, x):
        return self.conv(x)


class ResBlock(nn.Module):
    def __init__(self, res_channels, skip_channels, kernel_size, dilation):
        super().__init__()
        self.dilated = CausalDilatedConv1d(res_channels, res_channels, kernel_size, dilation)
        self.res_conv = nn.Conv1d(res_channels, res_channels, kernel_size=1)
        self.skip_conv = nn.Conv1d(res_channels, skip_channels, kernel_size=1)

    def forward(self, x, skip_size):
        h = self.dilated(x)
        h = torch.tanh(h) * torch.sigmoid(h)
        res = self.res_conv(h) + x[..., -h.size(2):]
        skip = self.skip_conv(h)[..., -skip_size:]
        return res, skip


class WaveNet(nn.Module):
    def __init__(self, in_channels, res_channels, skip_channels, kernel_size, stack_size, layer_size):
        super().__init__()
        self.kernel_size = kernel_size
        self.stack_size = stack_size
        self.layer_size = layer_size
        self.causal_conv = CausalDilatedConv1d(in_channels, res_channels, kernel_size, dilation=1)
        blocks = []
        for s in range(stack_size):
            for l in range(layer_size):
                blocks.append(ResBlock(res_channels, skip_channels, kernel_size, 2 ** l))
        self.res_blocks = nn.ModuleList(blocks)
        self.out1 = nn.Conv1d(skip_channels, skip_channels, kernel_size=1)
        self.out2 = nn.Conv1d(skip_channels, 1, kernel_size=1)

    def receptive_field(self):
        return int(np.sum([(self.kernel_size - 1) * (2 ** l) for l in range(self.layer_size)] * self.stack_size))

    def output_size(self, x):
        return int(x.size(2)) - self.receptive_field()

    def forward(self, x):
        x = self.causal_conv(x)
        skip_size = self.output_size(x)
        skips = 0
        for block in self.res_blocks:
            x, skip = block(x, skip_size)
            skips = skips + skip
        out = self.out1(torch.relu(skips))
        out = self.out2(torch.relu(out))
        return out


class WaveNetClassifier(nn.Module):
    def __init__(self, seq_len, n_classes):
        super().__init__()
        self.wavenet = WaveNet(1, 16, 16, kernel_size=2, stack_size=3, layer_size=4)
        self.linear = nn.Linear(seq_len - self.wavenet.receptive_field(), n_classes)

    def forward(self, x):
        x = self.wavenet(x)
        x = self.linear(x)
        return x.squeeze(1)


def main():
    seq_len = 50
    signal, open_channels = make_recording()
    dataset = TimeseriesDataset(signal, open_channels, seq_len)
    n_train = int(len(dataset) * 0.9)
    train_set, test_set = torch.utils.data.random_split(
        dataset, [n_train, len(dataset) - n_train], generator=torch.Generator().manual_seed(0))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=8, shuffle=True)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=64, shuffle=False)

    n_classes = int(open_channels.max()) + 1
    model = WaveNetClassifier(seq_len, n_classes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.005)
    loss_fn = nn.CrossEntropyLoss()
    print(f"classes: {n_classes}  train windows: {len(train_set)}  receptive field: {model.wavenet.receptive_field()}")

    step = 0
    max_steps = 200
    for epoch in range(10):
        model.train()
        for x, y in train_loader:
            x = x.unsqueeze(1)
            out = model(x)
            loss = loss_fn(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 40 == 0:
                model.eval()
                correct, total = 0, 0
                with torch.no_grad():
                    for i, (xt, yt) in enumerate(test_loader):
                        pred = model(xt.unsqueeze(1)).argmax(1)
                        correct += (pred == yt).sum().item()
                        total += yt.numel()
                        if i >= 10:
                            break
                print(f"step {step}  loss {loss.item():.4f}  test acc {100.0 * correct / total:.1f}%")
                model.train()
            if step >= max_steps:
                break
        if step >= max_steps:
            break
    print("done")


if __name__ == "__main__":
    main()
