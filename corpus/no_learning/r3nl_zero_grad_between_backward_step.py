"""House-price regression with a small MLP, mini-batches sliced by hand.

Synthetic listings: 12 numeric features (area, rooms, age, distance to the
centre, ...) standardised; the log-price is a smooth nonlinear function of
them plus noise.
"""
import numpy as np
import torch
import torch.nn as nn

np.random.seed(0)
torch.manual_seed(0)

n_train, n_test, n_feat = 4000, 800, 12
X = np.random.randn(n_train + n_test, n_feat).astype(np.float32)
w = np.random.randn(n_feat).astype(np.float32) / np.sqrt(n_feat)
y = (X @ w + 0.5 * np.tanh(X[:, 0] * X[:, 1]) - 0.3 * X[:, 2] ** 2 + 0.1 * np.random.randn(len(X))).astype(np.float32)
y = (y - y.mean()) / y.std()

X_train, y_train = torch.from_numpy(X[:n_train]), torch.from_numpy(y[:n_train]).unsqueeze(1)
X_test, y_test = torch.from_numpy(X[n_train:]), torch.from_numpy(y[n_train:]).unsqueeze(1)


class PriceNet(nn.Module):
    def __init__(self, n_in):
        super(PriceNet, self).__init__()
        self.hidden1 = nn.Linear(n_in, 64)
        self.hidden2 = nn.Linear(64, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        x = torch.relu(self.hidden1(x))
        x = torch.relu(self.hidden2(x))
        return self.out(x)


model = PriceNet(n_feat)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

batch_size = 100
n_epochs = 5
step = 0
for epoch in range(n_epochs):
    model.train()
    perm = torch.randperm(n_train)
    running = 0.0
    for i in range(0, n_train, batch_size):
        idx = perm[i:i + batch_size]
        xb, yb = X_train[idx], y_train[idx]

        pred = model(xb)
        loss = criterion(pred, yb)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()

        running += loss.item()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step:4d}  train mse {loss.item():.4f}")
        step += 1

    model.eval()
    with torch.no_grad():
        test_mse = criterion(model(X_test), y_test).item()
    print(f"== epoch {epoch}: mean train mse {running / (n_train // batch_size):.4f}  test mse {test_mse:.4f}")
