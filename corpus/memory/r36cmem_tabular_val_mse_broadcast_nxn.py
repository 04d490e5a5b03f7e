"""MLP regressor for a tabular property-prediction data set: mini-batch training,
validation MSE / R^2 computed on the whole held-out split at once."""
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)

n_features = 16
n_train, n_val = 8000, 24000


def make_split(n):
    X = torch.randn(n, n_features)
    w = torch.linspace(-1, 1, n_features)
    y = X @ w + 0.5 * torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n)
    return X, y


X_train, y_train = make_split(n_train)
X_val, y_val = make_split(n_val)
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=128, shuffle=True)

model = nn.Sequential(
    nn.Linear(n_features, 64), nn.ReLU(),
    nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 1),
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.MSELoss()


def evaluate(X, y):
    model.eval()
    with torch.no_grad():
        preds = model(X)
        mse = ((preds - y) ** 2).mean().item()
        r2 = 1 - mse / y.var().item()
    model.train()
    return mse, r2


for epoch in range(3):
    running = 0.0
    for xb, yb in train_loader:
        optimizer.zero_grad()
        out = model(xb).squeeze(1)
        loss = criterion(out, yb)
        loss.backward()
        optimizer.step()
        running += loss.item() * len(xb)
    val_mse, val_r2 = evaluate(X_val, y_val)
    print(f"epoch {epoch} train mse {running / n_train:.4f} val mse {val_mse:.4f} val r2 {val_r2:.3f}")
