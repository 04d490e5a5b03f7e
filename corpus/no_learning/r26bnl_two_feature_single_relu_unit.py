"""Binary classifier on two always-positive measurements: 2 inputs -> 1 ReLU hidden unit -> 1 sigmoid output.

The weights are initialised uniform(-0.05, 0.05) as in the Keras model this was ported from."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(19)


class MeasurementDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        length = 1.0 + 6.0 * torch.rand(n, generator=g)
        width = 0.5 + 2.5 * torch.rand(n, generator=g)
        self.x = torch.stack([length, width], dim=1)
        self.y = (length + 1.5 * width > 6.3).float()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(2, 1)
        self.relu = nn.ReLU()
        self.out = nn.Linear(1, 1)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.uniform_(m.weight, -0.05, 0.05)
                nn.init.uniform_(m.bias, -0.05, 0.05)

    def forward(self, x):
        return torch.sigmoid(self.out(self.relu(self.hidden(x)))).squeeze(1)


def main():
    train_ds = MeasurementDataset(1600, seed=0)
    test_ds = MeasurementDataset(400, seed=1)
    train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)

    model = TinyNet()
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)

    for epoch in range(4):
        model.train()
        total, n = 0.0, 0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            p = model(test_ds.x)
            acc = ((p > 0.5).float() == test_ds.y).float().mean().item()
        print(f"epoch {epoch + 1}: train loss {total / n:.4f}  test acc {acc:.3f}  "
              f"hidden w {model.hidden.weight.data.tolist()}")


if __name__ == "__main__":
    main()
