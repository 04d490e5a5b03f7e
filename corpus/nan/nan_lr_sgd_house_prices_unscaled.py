"""Linear regression of house prices (in dollars) from living area, bedrooms and age.

Gradient descent as in the course notebook: one nn.Linear, MSE loss, plain SGD.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

np.random.seed(0)
torch.manual_seed(0)

n_houses = 500
sqft = np.random.uniform(800, 4500, n_houses)
bedrooms = np.random.randint(1, 6, n_houses).astype(float)
age = np.random.uniform(0, 60, n_houses)
price = 50000 + 120 * sqft + 8000 * bedrooms - 900 * age + np.random.normal(0, 20000, n_houses)

x = torch.tensor(np.column_stack([sqft, bedrooms, age]), dtype=torch.float32)
y = torch.tensor(price, dtype=torch.float32).view(-1, 1)

loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

model = nn.Linear(3, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

num_epochs = 10
for epoch in range(num_epochs):
    running = 0.0
    for i, (features, target) in enumerate(loader):
        pred = model(features)
        loss = criterion(pred, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        if i % 5 == 0:
            print(f"epoch {epoch} batch {i:2d} loss {loss.item():.4e}")
    print(f"epoch {epoch}: mean loss {running / len(loader):.4e}  weights {model.weight.data.numpy().ravel()}")
