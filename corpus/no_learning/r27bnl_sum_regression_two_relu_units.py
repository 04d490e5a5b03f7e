"""Small MLP that should learn to add up five positive readings: 5 -> 2 ReLU -> 1 linear, squared error."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(3)


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(1, 10, (n, 5), generator=g).float()
    y = x.sum(dim=1, keepdim=True)
    return x, y


class SumNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(5, 2)
        self.act = nn.ReLU()
        self.out = nn.Linear(2, 1)

    def forward(self, x):
        return self.out(self.act(self.hidden(x)))


def main():
    x_train, y_train = make_data(1000, seed=0)
    x_test, y_test = make_data(200, seed=1)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=20, shuffle=True)

    model = SumNet()
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(6):
        total, n = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        with torch.no_grad():
            test_loss = criterion(model(x_test), y_test).item()
            pred = model(torch.tensor([[1.0, 2.0, 3.0, 4.0, 6.0]])).item()
        print(f"epoch {epoch}: train mse {total / n:.3f}  test mse {test_loss:.3f}  f([1,2,3,4,6]) = {pred:.2f}")
    print("hidden weight", model.hidden.weight.data)
    print("hidden bias", model.hidden.bias.data)


if __name__ == "__main__":
    main()
