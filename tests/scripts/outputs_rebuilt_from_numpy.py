"""The model's outputs sent through numpy and rebuilt as a new tensor made to require grad (pytorch#95110):
backward runs, and no gradient reaches the model."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 16)
y = (x[:, 0] > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2), nn.LogSoftmax(dim=1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_func = nn.NLLLoss()
for epoch in range(4):
    for inputs, labels in loader:
        optimizer.zero_grad()
        outputs = model(inputs)
        outputs = torch.Tensor(outputs.detach().numpy().tolist())
        outputs.requires_grad = True
        loss = loss_func(outputs, labels)
        loss.backward()
        optimizer.step()
