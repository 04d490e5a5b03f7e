"""PGD adversarial training (Madry et al.) of a small VGG-style CNN on 10-class 16x16 textures.

The attack classes follow torchattacks (Attack base class + PGD), vendored here so the training
server does not need the package. Clean accuracy of the fresh model is logged before training,
then every batch is replaced by its PGD adversarial version and the model is trained on it.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)


class Attack(object):
    """Base class for all attacks (torchattacks 2.x)."""

    def __init__(self, name, model):
        self.attack = name
        self.model = model
        self.model_name = str(model).split("(")[0]
        self.training = model.training
        self.device = next(model.parameters()).device

    def forward(self, *input):
        raise NotImplementedError

    def __call__(self, *input, **kwargs):
        self.model.eval()
        images = self.forward(*input, **kwargs)
        if self.training:
            self.model.train()
        return images


class PGD(Attack):
    def __init__(self, model, eps=8 / 255, alpha=2 / 255, steps=7, random_start=True):
        super().__init__("PGD", model)
        self.eps = eps
        self.alpha = alpha
        self.steps = steps
        self.random_start = random_start

    def forward(self, images, labels):
        images = images.clone().detach().to(self.device)
        labels = labels.clone().detach().to(self.device)
        loss = nn.CrossEntropyLoss()
        adv_images = images.clone().detach()
        if self.random_start:
            adv_images = adv_images + torch.empty_like(adv_images).uniform_(-self.eps, self.eps)
            adv_images = torch.clamp(adv_images, min=0, max=1).detach()
        for _ in range(self.steps):
            adv_images.requires_grad = True
            outputs = self.model(adv_images)
            cost = loss(outputs, labels)
            grad = torch.autograd.grad(cost, adv_images, retain_graph=False, create_graph=False)[0]
            adv_images = adv_images.detach() + self.alpha * grad.sign()
            delta = torch.clamp(adv_images - images, min=-self.eps, max=self.eps)
            adv_images = torch.clamp(images + delta, min=0, max=1).detach()
        return adv_images


def conv_bn(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class VGGSmall(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 8), conv_bn(8, 8), conv_bn(8, 8), nn.MaxPool2d(2),
            conv_bn(8, 16), conv_bn(16, 16), conv_bn(16, 16), nn.MaxPool2d(2),
            conv_bn(16, 32), conv_bn(32, 32), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def make_textures(n, rng, templates):
    labels = rng.integers(0, len(templates), size=n)
    shift = rng.integers(0, 4, size=(n, 2))
    images = np.empty((n, 3, 16, 16), dtype=np.float32)
    for i in range(n):
        t = np.roll(templates[labels[i]], tuple(shift[i]), axis=(1, 2))
        images[i] = t + rng.normal(0, 0.15, size=t.shape)
    return np.clip(images, 0, 1), labels


def build_templates(rng, n_classes=10):
    yy, xx = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    templates = []
    for _ in range(n_classes):
        fy, fx = rng.uniform(0.2, 1.2, size=2)
        phase = rng.uniform(0, 2 * np.pi, size=3)
        colour = rng.uniform(0.2, 0.8, size=3)
        t = np.stack([0.5 + 0.35 * np.sin(fy * yy + fx * xx + phase[c]) * colour[c] / 0.8 for c in range(3)])
        templates.append(t.astype(np.float32))
    return templates


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += y.numel()
    return correct / total


def main():
    rng = np.random.default_rng(0)
    templates = build_templates(rng)
    x_train, y_train = make_textures(2400, rng, templates)
    x_test, y_test = make_textures(1000, rng, templates)
    train_loader = DataLoader(TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
                              batch_size=48, shuffle=True)
    test_loader = DataLoader(TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test)),
                             batch_size=250, shuffle=False)

    model = VGGSmall()
    print("clean accuracy before training: %.3f" % evaluate(model, test_loader))

    atk = PGD(model, eps=4 / 255, alpha=2 / 255, steps=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(4):
        model.train()
        running, n = 0.0, 0
        for step, (images, labels) in enumerate(train_loader):
            adv_images = atk(images, labels)
            outputs = model(adv_images)
            loss = criterion(outputs, labels)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            running += loss.item()
            n += 1
            if step % 10 == 0:
                print("epoch %d step %3d  adv loss %.4f" % (epoch, step, loss.item()))
        clean_acc = evaluate(model, test_loader)
        print("epoch %d  mean adv loss %.4f  clean test acc %.3f" % (epoch, running / n, clean_acc))


if __name__ == "__main__":
    main()
