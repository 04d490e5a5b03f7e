"""'Fast is better than free' FGSM adversarial training (locuslab/fast_adversarial train_fgsm.py)
on small synthetic 3x16x16 texture images instead of CIFAR-10.

Each batch: delta starts uniform in [-epsilon, epsilon], one signed-gradient step of size alpha
on delta, projection back into the epsilon ball and the valid pixel range, then the model is
trained on X + delta. The learning rate follows a triangular cyclic schedule 0 -> lr_max -> 0
stepped every batch. Evaluation: clean accuracy and PGD-7 accuracy on a held-out set.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

epochs = 5
batch_size = 64
lr_max = 0.1
epsilon = 8 / 255.0
alpha = 10 / 255.0
mu = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1)
std = torch.tensor([0.25, 0.25, 0.25]).view(3, 1, 1)
upper_limit = (1 - mu) / std
lower_limit = (0 - mu) / std
epsilon = epsilon / std
alpha = alpha / std


def make_images(n, gen):
    labels = torch.randint(0, 4, (n,), generator=gen)
    yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    freq = torch.tensor([0.7, 0.7, 1.1, 1.1])[labels].view(n, 1, 1)
    phase = torch.rand(n, 1, 1, generator=gen) * 6.28
    horizontal = (labels % 2 == 0).view(n, 1, 1)
    coord = torch.where(horizontal, yy, xx)
    pattern = 0.5 + 0.1 * torch.sin(freq * coord + phase)
    color = 0.7 + 0.3 * torch.rand(n, 3, 1, 1, generator=gen)
    imgs = pattern.unsqueeze(1) * color + 0.12 * torch.randn(n, 3, 16, 16, generator=gen)
    imgs = imgs.clamp(0, 1)
    return (imgs - mu) / std, labels


g = torch.Generator().manual_seed(1)
train_x, train_y = make_images(2048, g)
test_x, test_y = make_images(256, g)
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=batch_size, shuffle=True, drop_last=True)
test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=256)


def clamp(X, lower_limit, upper_limit):
    return torch.max(torch.min(X, upper_limit), lower_limit)


class PreActBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride, bias=False)

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + shortcut


class PreActNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 12, 3, 1, 1, bias=False)
        self.layer1 = PreActBlock(12, 12)
        self.layer2 = PreActBlock(12, 24, stride=2)
        self.bn = nn.BatchNorm2d(24)
        self.linear = nn.Linear(24, num_classes)

    def forward(self, x):
        out = self.layer2(self.layer1(self.conv1(x)))
        out = F.relu(self.bn(out))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def attack_pgd(model, X, y, epsilon, alpha, attack_iters):
    delta = torch.zeros_like(X)
    for j in range(3):
        delta[:, j].uniform_(-epsilon[j].item(), epsilon[j].item())
    delta.data = clamp(delta, lower_limit - X, upper_limit - X)
    delta.requires_grad = True
    for _ in range(attack_iters):
        output = model(X + delta)
        loss = F.cross_entropy(output, y)
        loss.backward()
        grad = delta.grad.detach()
        d = clamp(delta + alpha * torch.sign(grad), -epsilon, epsilon)
        d = clamp(d, lower_limit - X, upper_limit - X)
        delta.data = d
        delta.grad.zero_()
    return delta.detach()


def evaluate(model):
    model.eval()
    clean, robust, n = 0, 0, 0
    for X, y in test_loader:
        with torch.no_grad():
            clean += (model(X).argmax(1) == y).sum().item()
        delta = attack_pgd(model, X, y, epsilon, alpha / 4, 7)
        with torch.no_grad():
            robust += (model(X + delta).argmax(1) == y).sum().item()
        n += y.size(0)
    model.train()
    return clean / n, robust / n


model = PreActNet()
model.train()
opt = torch.optim.SGD(model.parameters(), lr=lr_max, momentum=0.9, weight_decay=5e-4)
criterion = nn.CrossEntropyLoss()
lr_steps = epochs * len(train_loader)
scheduler = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.0, max_lr=lr_max, step_size_up=lr_steps / 2, step_size_down=lr_steps / 2)

start = time.time()
for epoch in range(epochs):
    train_loss, train_acc, train_n = 0.0, 0, 0
    for i, (X, y) in enumerate(train_loader):
        delta = torch.zeros_like(X)
        for j in range(len(epsilon)):
            delta[:, j, :, :].uniform_(-epsilon[j][0][0].item(), epsilon[j][0][0].item())
        delta.data = clamp(delta, lower_limit - X, upper_limit - X)
        delta.requires_grad = True
        output = model(X + delta)
        loss = criterion(output, y)
        loss.backward()
        grad = delta.grad.detach()
        delta.data = clamp(delta + alpha * torch.sign(grad), -epsilon, epsilon)
        delta.data = clamp(delta, lower_limit - X, upper_limit - X)
        delta = delta.detach()
        output = model(X + delta)
        loss = criterion(output, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_loss += loss.item() * y.size(0)
        train_acc += (output.argmax(1) == y).sum().item()
        train_n += y.size(0)
        scheduler.step()
        if i % 10 == 0:
            print(f"epoch {epoch} iter {i:3d} adv loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}")
    clean_acc, pgd_acc = evaluate(model)
    print(f"Epoch {epoch} \t Train Loss {train_loss / train_n:.4f} \t Train Acc {train_acc / train_n:.4f} \t Test Acc {clean_acc:.4f} \t PGD Acc {pgd_acc:.4f}")
print(f"Total train time: {time.time() - start:.1f}s")
