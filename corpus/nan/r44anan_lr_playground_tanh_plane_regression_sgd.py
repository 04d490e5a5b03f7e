"""Small tanh network fitting the 'plane' regression data set of the TensorFlow Playground
(two raw coordinates in [-6, 6] -> a value in [-1, 1]), one sample per step, like the page."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

RADIUS = 6.0
NOISE = 0.5
LEARNING_RATE = 1.0
BATCH_SIZE = 1
EPOCHS = 3


class PlaneData(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = (torch.rand(n, 2, generator=g) * 2 - 1) * RADIUS
        noisy = self.x + (torch.rand(n, 2, generator=g) * 2 - 1) * RADIUS * NOISE
        self.y = ((noisy[:, 0] + noisy[:, 1]) / 10.0).clamp(-1, 1).unsqueeze(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class PlaygroundNet(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.hidden = nn.Linear(2, hidden)
        self.act = nn.Tanh()
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.out(self.act(self.hidden(x)))


train_set = PlaneData(250, seed=1)
test_set = PlaneData(250, seed=2)
train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
test_loader = DataLoader(test_set, batch_size=50)

model = PlaygroundNet()
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for xb, yb in train_loader:
        pred = model(xb)
        loss = criterion(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 25 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}  avg {running / 25:.4f}")
            running = 0.0
    model.eval()
    with torch.no_grad():
        test_loss = sum(criterion(model(xb), yb).item() * len(xb) for xb, yb in test_loader) / len(test_set)
    print(f"epoch {epoch + 1}: test loss {test_loss:.4f}")
