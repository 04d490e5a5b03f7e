"""MLP classifier for a tabular sensor data set, trained with a small Trainer class.

Before the first update the Trainer runs a data-dependent initialisation in the spirit of LSUV
(layer-sequential unit-variance): each Linear layer's weight is orthogonalised (bias zeroed) and rescaled so
that its pre-activations on the first batch have unit variance. The data (6 activity classes,
24 sensor features) is generated here.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_FEATURES = 24
N_CLASSES = 6


class ActivityMLP(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_hidden)
        self.fc3 = nn.Linear(n_hidden, n_hidden)
        self.head = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.head(x)


@torch.no_grad()
def lsuv_init(model, batch, tol=0.05, max_iter=10):
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for layer in layers:
        w = torch.empty_like(layer.weight)
        nn.init.orthogonal_(w)
        layer.weight = nn.Parameter(w)
        layer.bias = nn.Parameter(torch.zeros_like(layer.bias))
        captured = {}
        handle = layer.register_forward_hook(lambda m, i, o: captured.__setitem__("out", o))
        for _ in range(max_iter):
            model(batch)
            std = captured["out"].std().item()
            if abs(std - 1.0) < tol:
                break
            layer.weight.div_(std)
        handle.remove()
        print("LSUV %-6s std %.3f" % (type(layer).__name__, captured["out"].std().item()))


class Trainer:
    def __init__(self, model, lr=1e-3, weight_decay=1e-4):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.criterion = nn.CrossEntropyLoss()
        self.initialised = False

    def fit(self, train_loader, val_loader, epochs):
        for epoch in range(1, epochs + 1):
            self.model.train()
            total, n = 0.0, 0
            for x, y in train_loader:
                if not self.initialised:
                    lsuv_init(self.model, x)
                    self.initialised = True
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                total += loss.item() * len(y)
                n += len(y)
            val_loss, val_acc = self.evaluate(val_loader)
            print("epoch %2d  train loss %.4f  val loss %.4f  val acc %.3f"
                  % (epoch, total / n, val_loss, val_acc))

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        total, correct, n = 0.0, 0, 0
        for x, y in loader:
            out = self.model(x)
            total += self.criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            n += len(y)
        return total / n, correct / n


def make_sensor_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(7)) * 1.2
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    x = centers[y] + torch.randn(n, N_FEATURES, generator=g)
    x = torch.tanh(x) * 3.0 + 0.3 * torch.randn(n, N_FEATURES, generator=g)
    return x, y


def main():
    x_train, y_train = make_sensor_data(4000, seed=1)
    x_val, y_val = make_sensor_data(1000, seed=2)
    mean, std = x_train.mean(0), x_train.std(0)
    x_train, x_val = (x_train - mean) / std, (x_val - mean) / std
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=100, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=500)

    model = ActivityMLP(N_FEATURES, 128, N_CLASSES)
    trainer = Trainer(model, lr=1e-3)
    trainer.fit(train_loader, val_loader, epochs=5)


if __name__ == "__main__":
    main()
