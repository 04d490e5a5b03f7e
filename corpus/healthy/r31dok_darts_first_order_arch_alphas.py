"""Differentiable architecture search (DARTS, first-order) on small synthetic images.

Follows quark0/darts cnn/train_search.py + model_search.py + architect.py, shrunk: every edge is a
MixedOp (softmax over the architecture weights alpha of a few candidate ops), the network weights
are trained on one half of the training data with SGD and the alphas on the other half with Adam
(bilevel search, first-order approximation: unrolled=False).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(2)

EPOCHS = 5
BATCH_SIZE = 64
LEARNING_RATE = 0.05
LEARNING_RATE_MIN = 0.001
MOMENTUM = 0.9
WEIGHT_DECAY = 3e-4
GRAD_CLIP = 5.0
ARCH_LEARNING_RATE = 3e-3
ARCH_WEIGHT_DECAY = 1e-3
C = 8
NUM_CLASSES = 4

PRIMITIVES = ["none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3", "dil_conv_3x3"]


def make_data(n):
    # oriented gratings with random phase and noise: class = orientation
    ys = torch.randint(0, NUM_CLASSES, (n,))
    g = torch.arange(12, dtype=torch.float32)
    yy, xx = torch.meshgrid(g, g, indexing="ij")
    angles = ys.float() * math.pi / NUM_CLASSES
    phase = torch.rand(n) * 2 * math.pi
    proj = xx[None] * torch.cos(angles)[:, None, None] + yy[None] * torch.sin(angles)[:, None, None]
    img = torch.sin(1.3 * proj + phase[:, None, None])
    img = img + 1.2 * torch.randn_like(img)
    return img.unsqueeze(1), ys


class Zero(nn.Module):
    def forward(self, x):
        return x.mul(0.0)


class SepConv(nn.Module):
    def __init__(self, C, dilation=1):
        super().__init__()
        pad = dilation
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(C, C, 3, padding=pad, dilation=dilation, groups=C, bias=False),
            nn.Conv2d(C, C, 1, bias=False),
            nn.BatchNorm2d(C, affine=False),
        )

    def forward(self, x):
        return self.op(x)


OPS = {
    "none": lambda C: Zero(),
    "max_pool_3x3": lambda C: nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.BatchNorm2d(C, affine=False)),
    "avg_pool_3x3": lambda C: nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False),
                                            nn.BatchNorm2d(C, affine=False)),
    "skip_connect": lambda C: nn.Identity(),
    "sep_conv_3x3": lambda C: SepConv(C, 1),
    "dil_conv_3x3": lambda C: SepConv(C, 2),
}


class MixedOp(nn.Module):
    def __init__(self, C):
        super().__init__()
        self._ops = nn.ModuleList([OPS[p](C) for p in PRIMITIVES])

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Cell(nn.Module):
    """Two intermediate nodes; node 0 <- input, node 1 <- input + node 0; output = concat."""

    def __init__(self, C):
        super().__init__()
        self.pre = nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False),
                                 nn.BatchNorm2d(C, affine=False))
        self._ops = nn.ModuleList([MixedOp(C) for _ in range(3)])
        self.reduce = nn.Conv2d(2 * C, C, 1, bias=False)

    def forward(self, s0, weights):
        s0 = self.pre(s0)
        n0 = self._ops[0](s0, weights[0])
        n1 = self._ops[1](s0, weights[1]) + self._ops[2](n0, weights[2])
        return self.reduce(torch.cat([n0, n1], dim=1))


class Network(nn.Module):
    def __init__(self, C, num_classes, layers=1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
        self.cells = nn.ModuleList([Cell(C) for _ in range(layers)])
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(C, num_classes)
        self._initialize_alphas()

    def _initialize_alphas(self):
        k = 3
        num_ops = len(PRIMITIVES)
        self.alphas_normal = (1e-3 * torch.randn(k, num_ops)).requires_grad_(True)
        self._arch_parameters = [self.alphas_normal]

    def arch_parameters(self):
        return self._arch_parameters

    def forward(self, x):
        s = self.stem(x)
        weights = F.softmax(self.alphas_normal, dim=-1)
        for cell in self.cells:
            s = cell(s, weights)
        out = self.global_pooling(s)
        return self.classifier(out.flatten(1))

    def genotype(self):
        w = F.softmax(self.alphas_normal, dim=-1).detach()
        best = []
        for row in w:
            j = max((k for k in range(len(PRIMITIVES)) if PRIMITIVES[k] != "none"), key=lambda k: row[k])
            best.append(PRIMITIVES[j])
        return best


class Architect:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.arch_parameters(), lr=ARCH_LEARNING_RATE,
                                          betas=(0.5, 0.999), weight_decay=ARCH_WEIGHT_DECAY)

    def step(self, input_valid, target_valid):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(input_valid), target_valid)
        loss.backward()
        self.optimizer.step()


def infer(loader, model):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            total += y.numel()
    return loss_sum / total, correct / total


def main():
    x, y = make_data(1024)
    split = 512
    train_queue = DataLoader(TensorDataset(x[:split], y[:split]), batch_size=BATCH_SIZE, shuffle=True)
    valid_queue = DataLoader(TensorDataset(x[split:], y[split:]), batch_size=BATCH_SIZE, shuffle=True)
    xt, yt = make_data(512)
    test_queue = DataLoader(TensorDataset(xt, yt), batch_size=256)

    model = Network(C, NUM_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), LEARNING_RATE, momentum=MOMENTUM,
                                weight_decay=WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, EPOCHS, eta_min=LEARNING_RATE_MIN)
    architect = Architect(model)

    loss0, acc0 = infer(test_queue, model)
    print(f"init test loss {loss0:.4f} acc {acc0:.3f}")
    for epoch in range(EPOCHS):
        model.train()
        lr = scheduler.get_last_lr()[0]
        objs, n = 0.0, 0
        valid_iter = iter(valid_queue)
        for step, (input, target) in enumerate(train_queue):
            try:
                input_search, target_search = next(valid_iter)
            except StopIteration:
                valid_iter = iter(valid_queue)
                input_search, target_search = next(valid_iter)

            architect.step(input_search, target_search)

            optimizer.zero_grad()
            logits = model(input)
            loss = F.cross_entropy(logits, target)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
            optimizer.step()
            objs += loss.item() * target.size(0)
            n += target.size(0)
        scheduler.step()
        test_loss, test_acc = infer(test_queue, model)
        print(f"epoch {epoch} lr {lr:.4f} train_loss {objs / n:.4f} test_loss {test_loss:.4f} "
              f"test_acc {test_acc:.3f} genotype {model.genotype()}")
        print(F.softmax(model.alphas_normal, dim=-1).detach().numpy().round(3))


if __name__ == "__main__":
    main()
