"""Deep Sets: learn the sum of a set of digit images (InvariantModel = rho(sum_i phi(x_i))).

Port of the SumOfDigits experiment: a small CNN phi maps every image of the set to a 10-d code,
the codes are summed over the set, and a small MLP rho regresses the sum. One set per optimizer
step, sets of 2..10 images for training and longer sets for testing.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import Dataset

torch.manual_seed(0)
random.seed(0)

IMG = 20


def make_templates():
    g = torch.Generator().manual_seed(123)
    t = (torch.rand(10, 1, IMG, IMG, generator=g) > 0.6).float()
    return t


TEMPLATES = make_templates()


class DigitSummation(Dataset):
    def __init__(self, min_len, max_len, dataset_len, seed):
        self.g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(dataset_len):
            n = int(torch.randint(min_len, max_len + 1, (1,), generator=self.g))
            labels = torch.randint(0, 10, (n,), generator=self.g)
            imgs = TEMPLATES[labels] + 0.1 * torch.randn(n, 1, IMG, IMG, generator=self.g)
            imgs = (imgs - 0.4) / 0.5
            self.items.append((imgs, labels.sum().float().view(1, 1)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class InvariantModel(nn.Module):
    def __init__(self, phi, rho):
        super().__init__()
        self.phi = phi
        self.rho = rho

    def forward(self, x):
        x = self.phi(x)
        x = torch.sum(x, dim=0, keepdim=True)
        out = self.rho(x)
        return out


class SmallCNNPhi(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(0.2)
        self.fc1 = nn.Linear(20 * 2 * 2, 50)
        self.fc1_drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = self.conv2_drop(self.conv2(x))
        x = F.relu(F.max_pool2d(x, 2))
        x = x.view(-1, 20 * 2 * 2)
        x = F.relu(self.fc1(x))
        x = self.fc1_drop(x)
        x = F.relu(self.fc2(x))
        return x


class SmallRho(nn.Module):
    def __init__(self, input_size, output_size=1):
        super().__init__()
        self.fc1 = nn.Linear(input_size, 10)
        self.fc2 = nn.Linear(10, output_size)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def evaluate(model, db):
    model.eval()
    correct, abs_err = 0, 0.0
    with torch.no_grad():
        for i in range(len(db)):
            x, target = db[i]
            pred = float(model(x)[0, 0])
            abs_err += abs(pred - float(target[0, 0]))
            correct += int(round(pred) == int(target[0, 0]))
    model.train()
    return correct / len(db), abs_err / len(db)


train_db = DigitSummation(min_len=2, max_len=10, dataset_len=600, seed=1)
test_db = DigitSummation(min_len=5, max_len=15, dataset_len=150, seed=2)

model = InvariantModel(phi=SmallCNNPhi(), rho=SmallRho(input_size=10, output_size=1))
optimizer = optim.Adam(model.parameters(), lr=1e-3)

acc, mae = evaluate(model, test_db)
print(f"before training: test acc {acc:.3f} test mae {mae:.3f}")

for epoch in range(2):
    order = list(range(len(train_db)))
    random.shuffle(order)
    running = 0.0
    for step, i in enumerate(order, 1):
        x, target = train_db[i]
        optimizer.zero_grad()
        pred = model(x)
        the_loss = F.mse_loss(pred, target)
        the_loss.backward()
        optimizer.step()
        running += the_loss.item()
        if step % 100 == 0:
            print(f"epoch {epoch} item {step} train mse {running / 100:.3f}")
            running = 0.0
    acc, mae = evaluate(model, test_db)
    print(f"epoch {epoch}: test acc {acc:.3f} test mae {mae:.3f}")
