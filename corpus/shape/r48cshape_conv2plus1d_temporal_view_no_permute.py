"""Action recognition toy: (2+1)D convolutions (spatial Conv2d per frame, then temporal Conv1d
per pixel) on short RGB clips of a moving object; 4 classes = direction of motion."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

T, S = 8, 12
DIRECTIONS = [(0, 1), (0, -1), (1, 0), (-1, 0)]


class MovingBlobClips(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.clips = torch.zeros(n, 3, T, S, S)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        for i in range(n):
            dy, dx = DIRECTIONS[self.labels[i]]
            y, x = torch.randint(0, S, (2,), generator=g).tolist()
            color = 0.4 + 0.6 * torch.rand(3, generator=g)
            frame = torch.zeros(3, S, S)
            frame[:, 0:3, 0:3] = color.view(3, 1, 1)
            for t in range(T):
                self.clips[i, :, t] = torch.roll(frame, (y + dy * t, x + dx * t), dims=(1, 2))
            self.clips[i] += 0.1 * torch.randn(3, T, S, S, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.clips[idx], self.labels[idx]


class Conv2Plus1D(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, mid_channels=None):
        super().__init__()
        mid_channels = mid_channels or out_channels
        self.out_channels = out_channels
        self.conv2d = nn.Conv2d(in_channels, mid_channels, kernel_size, padding=kernel_size // 2)
        self.relu = nn.ReLU()
        self.conv1d = nn.Conv1d(mid_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        b, c, t, d1, d2 = x.size()
        x = x.permute(0, 2, 1, 3, 4).contiguous().view(b * t, c, d1, d2)
        x = self.relu(self.conv2d(x))
        dr1, dr2 = x.size(2), x.size(3)
        x = x.view(b * dr1 * dr2, x.size(1), t)
        x = self.conv1d(x)
        x = x.view(b, dr1, dr2, self.out_channels, t).permute(0, 3, 4, 1, 2)
        return x.contiguous()


class R2Plus1DNet(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.block1 = Conv2Plus1D(3, 8)
        self.bn1 = nn.BatchNorm3d(8)
        self.block2 = Conv2Plus1D(8, 16)
        self.bn2 = nn.BatchNorm3d(16)
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.block1(x)))
        x = torch.relu(self.bn2(self.block2(x)))
        return self.fc(self.pool(x).flatten(1))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for clips, labels in loader:
            correct += (model(clips).argmax(1) == labels).sum().item()
            total += len(labels)
    return correct / total


def main():
    train_loader = DataLoader(MovingBlobClips(384, seed=1), batch_size=32, shuffle=True)
    val_loader = DataLoader(MovingBlobClips(128, seed=2), batch_size=64)
    model = R2Plus1DNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    for epoch in range(6):
        model.train()
        total_loss = 0.0
        for clips, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(clips), labels)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        print(f"epoch {epoch + 1} train loss {total_loss / len(train_loader):.4f} "
              f"val acc {evaluate(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
