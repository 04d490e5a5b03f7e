"""'Adversarial training for free' on small synthetic images.

After mahyarnajibi/FreeAdversarialTraining main_free.py: every minibatch is replayed n_repeats
times; each replay does one backward that gives both the weight gradients and the gradient of
the loss w.r.t. a persistent perturbation (global_noise_data), which is pushed up by an FGSM step
and clipped to eps for the next replay / the next minibatch. The number of epochs is divided by
n_repeats so the total number of backward passes matches natural training.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

EPOCHS = 16
N_REPEATS = 4
BATCH_SIZE = 64
LR = 0.05
CLIP_EPS = 8.0 / 255
FGSM_STEP = 8.0 / 255
NUM_CLASSES = 4
IMG = 12

mean = torch.tensor([0.5]).view(1, 1, 1, 1)
std = torch.tensor([0.25]).view(1, 1, 1, 1)


def make_data(n):
    # a brighter blob in one of four quadrants on a noisy background, pixels in [0, 1]
    ys = torch.randint(0, NUM_CLASSES, (n,))
    x = 0.45 + 0.15 * torch.randn(n, 1, IMG, IMG)
    h = IMG // 2
    for k in range(n):
        r = (ys[k] // 2) * h + torch.randint(0, h - 3, (1,)).item()
        c = (ys[k] % 2) * h + torch.randint(0, h - 3, (1,)).item()
        x[k, 0, r:r + 3, c:c + 3] += 0.14
    return x.clamp(0, 1), ys


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 3 * 3, NUM_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def fgsm(gradz, step_size):
    return step_size * torch.sign(gradz)


def pgd_eval(model, loader, eps, steps=5):
    model.eval()
    clean, robust, total = 0, 0, 0
    for input, target in loader:
        with torch.no_grad():
            clean += (model((input - mean) / std).argmax(1) == target).sum().item()
        delta = torch.zeros_like(input).uniform_(-eps, eps).requires_grad_(True)
        for _ in range(steps):
            out = model(((input + delta).clamp(0, 1) - mean) / std)
            loss = F.cross_entropy(out, target)
            grad, = torch.autograd.grad(loss, delta)
            delta = (delta + 2.5 * eps / steps * grad.sign()).clamp(-eps, eps).detach().requires_grad_(True)
        with torch.no_grad():
            out = model(((input + delta).clamp(0, 1) - mean) / std)
            robust += (out.argmax(1) == target).sum().item()
        total += target.numel()
    return clean / total, robust / total


def adjust_learning_rate(optimizer, epoch, total_epochs):
    lr = LR * (0.1 ** (epoch // math.ceil(total_epochs * 0.7)))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr


def main():
    x, y = make_data(1024)
    xt, yt = make_data(512)
    train_loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)
    val_loader = DataLoader(TensorDataset(xt, yt), batch_size=256)

    model = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), LR, momentum=0.9, weight_decay=5e-4)

    epochs = int(math.ceil(EPOCHS / N_REPEATS))
    global global_noise_data
    global_noise_data = torch.zeros([BATCH_SIZE, 1, IMG, IMG])

    c0, r0 = pgd_eval(model, val_loader, CLIP_EPS)
    print(f"init: clean acc {c0:.3f} pgd5 acc {r0:.3f}")
    for epoch in range(epochs):
        lr = adjust_learning_rate(optimizer, epoch, epochs)
        model.train()
        loss_sum, correct, seen = 0.0, 0, 0
        for i, (input, target) in enumerate(train_loader):
            for j in range(N_REPEATS):
                noise_batch = global_noise_data[0:input.size(0)].clone().requires_grad_(True)
                in1 = input + noise_batch
                in1.clamp_(0, 1.0)
                in1.sub_(mean).div_(std)
                output = model(in1)
                loss = criterion(output, target)

                optimizer.zero_grad()
                loss.backward()

                pert = fgsm(noise_batch.grad, FGSM_STEP)
                global_noise_data[0:input.size(0)] += pert.data
                global_noise_data.clamp_(-CLIP_EPS, CLIP_EPS)

                optimizer.step()
                loss_sum += loss.item() * target.size(0)
                correct += (output.argmax(1) == target).sum().item()
                seen += target.size(0)
        clean_acc, pgd_acc = pgd_eval(model, val_loader, CLIP_EPS)
        print(f"epoch {epoch} lr {lr:.4f} adv train loss {loss_sum / seen:.4f} "
              f"adv train acc {correct / seen:.3f} | val clean acc {clean_acc:.3f} pgd5 acc {pgd_acc:.3f}")


if __name__ == "__main__":
    main()
