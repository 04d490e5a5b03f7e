"""Growing CNN (GroMo style): a small conv net trained on synthetic 16x16 shape images while
its growing layers accumulate the input statistics S = X^T X that are later used to compute
the new neurons to add (trace and top eigenvalue of S are logged every epoch)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class ShapesDataset(Dataset):
    def __init__(self, n=1760, size=16, num_classes=4):
        g = torch.Generator().manual_seed(1)
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing='ij')
        self.y = torch.randint(0, num_classes, (n,), generator=g)
        cx = torch.rand(n, generator=g) * 8 + 4
        cy = torch.rand(n, generator=g) * 8 + 4
        dx, dy = xx[None] - cx[:, None, None], yy[None] - cy[:, None, None]
        disk = ((dx ** 2 + dy ** 2) < 12).float()
        square = ((dx.abs() < 3) & (dy.abs() < 3)).float()
        hbar = ((dx.abs() < 5) & (dy.abs() < 1.5)).float()
        vbar = ((dx.abs() < 1.5) & (dy.abs() < 5)).float()
        shapes = torch.stack([disk, square, hbar, vbar], 1)
        img = shapes[torch.arange(n), self.y]
        color = torch.rand(n, 3, 1, 1, generator=g) * 0.5 + 0.5
        self.x = img[:, None] * color + 0.1 * torch.randn(n, 3, size, size, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class TensorStatistic:
    def __init__(self, shape):
        self.shape = shape
        self._tensor = torch.zeros(shape)
        self.samples = 0

    def update(self, update, n):
        self._tensor += update
        self.samples += n

    def __call__(self):
        return self._tensor / max(self.samples, 1)

    def reset(self):
        self._tensor = torch.zeros(self.shape)
        self.samples = 0


class Conv2dGrowingModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, padding=1):
        super().__init__()
        self.layer = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)
        self.kernel_size = kernel_size
        self.padding = padding
        d = in_channels * kernel_size * kernel_size + 1
        self.tensor_s = TensorStatistic((d, d))
        self.store_input = False
        self.input = None

    def forward(self, x):
        if self.store_input:
            self.input = x
        return self.layer(x)

    def compute_s_update(self):
        unfolded = F.unfold(self.input, self.kernel_size, padding=self.padding)
        b, d, l = unfolded.shape
        flat = unfolded.permute(0, 2, 1).reshape(b * l, d)
        flat = torch.cat([flat, torch.ones(b * l, 1)], dim=1)
        return flat.T @ flat, b * l


class LinearGrowingModule(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.layer = nn.Linear(in_features, out_features)
        self.tensor_s = TensorStatistic((in_features + 1, in_features + 1))
        self.store_input = False
        self.input = None

    def forward(self, x):
        if self.store_input:
            self.input = x
        return self.layer(x)

    def compute_s_update(self):
        x = torch.cat([self.input, torch.ones(self.input.size(0), 1)], dim=1)
        return x.T @ x, x.size(0)


class GrowingCNN(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = Conv2dGrowingModule(8, 16)
        self.conv3 = Conv2dGrowingModule(16, 24)
        self.fc = LinearGrowingModule(24 * 4 * 4, num_classes)

    def growing_layers(self):
        return [self.conv2, self.conv3, self.fc]

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        return self.fc(x.flatten(1))


def main():
    dataset = ShapesDataset()
    train_set, val_set = torch.utils.data.random_split(dataset, [1600, 160], generator=torch.Generator().manual_seed(2))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=160)
    model = GrowingCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for layer in model.growing_layers():
        layer.store_input = True

    step = 0
    for epoch in range(2):
        model.train()
        running, correct, seen = 0.0, 0, 0
        for x, y in train_loader:
            out = model(x)
            loss = F.cross_entropy(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            for layer in model.growing_layers():
                layer.tensor_s.update(*layer.compute_s_update())
            running += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {running / seen:.4f} acc {correct / seen:.3f}", flush=True)

        model.eval()
        val_correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                val_correct += (model(x).argmax(1) == y).sum().item()
        stats = []
        for name, layer in [("conv2", model.conv2), ("conv3", model.conv3), ("fc", model.fc)]:
            s = layer.tensor_s().detach()
            stats.append(f"{name} tr(S) {s.trace().item():.2f} eig_max {torch.linalg.eigvalsh(s)[-1].item():.2f}")
        print(f"epoch {epoch} train loss {running / seen:.4f} val acc {val_correct / len(val_set):.3f} | " + ", ".join(stats), flush=True)


if __name__ == "__main__":
    main()
