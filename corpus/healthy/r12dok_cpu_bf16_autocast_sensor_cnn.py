"""Mixed-precision training on CPU with bfloat16 autocast, following the "CPU Training Example"
and "CPU Inference Example" of the torch.amp documentation (torch.autocast(device_type="cpu",
dtype=torch.bfloat16) around forward + loss, backward and optimizer.step() outside it, no
GradScaler since bf16 keeps float32's exponent range).

The model is a small 1D-CNN that classifies 3-axis accelerometer windows into 6 activities.
The sensor data is synthetic: per-activity base frequency, amplitude and axis mix, with random
phase, gravity offset, drift and noise.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

ACTIVITIES = ["walking", "upstairs", "downstairs", "sitting", "standing", "lying"]
WINDOW = 64
EPOCHS = 6
BATCH_SIZE = 64


def make_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    freqs = torch.tensor([1.9, 1.6, 2.2, 0.0, 0.0, 0.0])
    amps = torch.tensor([1.0, 0.8, 1.2, 0.05, 0.08, 0.05])
    gravity_axis = torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.95, 0.1], [-0.2, 0.95, 0.1],
                                 [0.6, 0.7, 0.3], [0.0, 1.0, 0.05], [0.1, 0.1, 1.0]])
    mix = torch.tensor([[0.6, 0.3, 0.1], [0.4, 0.5, 0.1], [0.5, 0.2, 0.3],
                        [0.3, 0.3, 0.4], [0.3, 0.4, 0.3], [0.2, 0.2, 0.6]])
    y = torch.randint(0, len(ACTIVITIES), (n,), generator=g)
    t = torch.arange(WINDOW).float() / 20.0  # 20 Hz
    phase = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    f = freqs[y].view(n, 1, 1) * (1 + 0.15 * torch.randn(n, 1, 1, generator=g))
    a = amps[y].view(n, 1, 1) * (1 + 0.25 * torch.randn(n, 1, 1, generator=g)).abs()
    wave = torch.sin(2 * math.pi * f * t.view(1, 1, -1) + phase) + 0.3 * torch.sin(4 * math.pi * f * t.view(1, 1, -1) + 2 * phase)
    x = a * mix[y].unsqueeze(-1) * wave
    x = x + gravity_axis[y].unsqueeze(-1) * (1 + 0.1 * torch.randn(n, 1, 1, generator=g))
    x = x + 0.02 * torch.randn(n, 3, 1, generator=g) * t.view(1, 1, -1)
    x = x + 0.25 * torch.randn(n, 3, WINDOW, generator=g)
    return x, y


class Net(nn.Module):
    def __init__(self, n_classes=6):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, kernel_size=5, padding=2)
        self.bn1 = nn.BatchNorm1d(32)
        self.conv2 = nn.Conv1d(32, 64, kernel_size=5, padding=2)
        self.bn2 = nn.BatchNorm1d(64)
        self.conv3 = nn.Conv1d(64, 64, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool1d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.conv3(x))
        x = x.mean(dim=-1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


x_train, y_train = make_windows(3072, seed=1)
x_test, y_test = make_windows(768, seed=2)
mean = x_train.mean(dim=(0, 2), keepdim=True)
std = x_train.std(dim=(0, 2), keepdim=True)
train_loader = DataLoader(TensorDataset((x_train - mean) / std, y_train), batch_size=BATCH_SIZE, shuffle=True)
test_loader = DataLoader(TensorDataset((x_test - mean) / std, y_test), batch_size=256)

# Creates model and optimizer in default precision
model = Net()
optimizer = optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
loss_fn = nn.CrossEntropyLoss()


def evaluate():
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        for input, target in test_loader:
            output = model(input)
            loss_sum += loss_fn(output, target).item() * target.size(0)
            correct += (output.argmax(dim=1) == target).sum().item()
            total += target.size(0)
    model.train()
    return loss_sum / total, correct / total


val_loss, val_acc = evaluate()
print(f"before training: val loss {val_loss:.4f}  val acc {val_acc:.3f}")

step = 0
for epoch in range(EPOCHS):
    start = time.time()
    running = 0.0
    for input, target in train_loader:
        optimizer.zero_grad()

        # Runs the forward pass with autocasting.
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            output = model(input)
            loss = loss_fn(output, target)

        loss.backward()
        optimizer.step()

        running += loss.item()
        step += 1
        if step == 1:
            print(f"output dtype {output.dtype}, loss dtype {loss.dtype}, grad dtype {model.fc2.weight.grad.dtype}")
        if step % 16 == 0:
            print(f"epoch {epoch} step {step:4d}  train loss {running / 16:.4f}")
            running = 0.0
    val_loss, val_acc = evaluate()
    print(f"epoch {epoch}: val loss {val_loss:.4f}  val acc {val_acc:.3f}  ({time.time() - start:.1f}s)")

for i, name in enumerate(ACTIVITIES):
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        model.eval()
        sel = y_test == i
        pred = model((x_test[sel] - mean) / std).argmax(dim=1)
    print(f"{name:>10s}: recall {(pred == i).float().mean().item():.3f}")
