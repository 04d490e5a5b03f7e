"""Texture classifier (a small VGG-style conv net with BatchNorm) trained with accelerate.

Training follows an annealed-score-matching runner's loop: step counter, SGD with momentum
from a config dict, a test batch drawn from a cycling test iterator every `test_freq` steps
and its loss logged, and a snapshot of the model and optimizer state every `snapshot_freq`
steps into a temporary run directory.

Synthetic 16x16 grey-scale textures, 4 classes: horizontal stripes, vertical stripes,
checkerboard, diagonal stripes, each with random phase and frequency, contrast and noise.
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

config = {
    "training": {"batch_size": 32, "n_epochs": 3, "n_iters": 160, "test_freq": 20, "snapshot_freq": 100},
    "optim": {"optimizer": "SGD", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0},
    "model": {"ngf": 12, "num_classes": 4},
}


class Textures(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        self.labels = torch.randint(0, 4, (n,), generator=g)
        freq = 0.5 + 0.6 * torch.rand(n, generator=g)
        phase = 6.28 * torch.rand(n, generator=g)
        contrast = 0.5 + torch.rand(n, generator=g)
        imgs = torch.empty(n, 1, 16, 16)
        for i in range(n):
            f, p = freq[i], phase[i]
            k = int(self.labels[i])
            if k == 0:
                pat = torch.sin(f * yy + p)
            elif k == 1:
                pat = torch.sin(f * xx + p)
            elif k == 2:
                pat = torch.sin(f * xx + p) * torch.sin(f * yy + p)
            else:
                pat = torch.sin(0.7 * f * (xx + yy) + p)
            imgs[i, 0] = contrast[i] * pat
        self.imgs = imgs + 0.4 * torch.randn(n, 1, 16, 16, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.imgs[i], self.labels[i]


def conv_block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class TextureNet(nn.Module):
    def __init__(self, ngf, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            conv_block(1, ngf), conv_block(ngf, ngf), nn.MaxPool2d(2),
            conv_block(ngf, ngf), conv_block(ngf, ngf), conv_block(ngf, ngf), nn.MaxPool2d(2),
            conv_block(ngf, ngf), conv_block(ngf, ngf),
        )
        self.classifier = nn.Linear(ngf, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean(dim=(2, 3)))


def get_optimizer(parameters):
    if config["optim"]["optimizer"] == "Adam":
        return torch.optim.Adam(parameters, lr=config["optim"]["lr"], weight_decay=config["optim"]["weight_decay"])
    elif config["optim"]["optimizer"] == "SGD":
        return torch.optim.SGD(parameters, lr=config["optim"]["lr"], momentum=config["optim"]["momentum"],
                               weight_decay=config["optim"]["weight_decay"])
    raise NotImplementedError("Optimizer {} not understood.".format(config["optim"]["optimizer"]))


def train(run_dir):
    accelerator = Accelerator(cpu=True)
    dataset = Textures(1920, seed=1)
    test_dataset = Textures(512, seed=2)
    dataloader = DataLoader(dataset, batch_size=config["training"]["batch_size"], shuffle=True)
    test_loader = DataLoader(test_dataset, batch_size=128, shuffle=True, drop_last=True)

    model = TextureNet(config["model"]["ngf"], config["model"]["num_classes"])
    optimizer = get_optimizer(model.parameters())
    model, optimizer, dataloader, test_loader = accelerator.prepare(model, optimizer, dataloader, test_loader)
    test_iter = iter(test_loader)

    step = 0
    model.train()
    for epoch in range(config["training"]["n_epochs"]):
        for i, (X, y) in enumerate(dataloader):
            if step % config["training"]["test_freq"] == 0:
                model.eval()
                try:
                    test_X, test_y = next(test_iter)
                except StopIteration:
                    test_iter = iter(test_loader)
                    test_X, test_y = next(test_iter)
                with torch.no_grad():
                    test_logits = model(test_X)
                    test_loss = F.cross_entropy(test_logits, test_y)
                    test_acc = (test_logits.argmax(1) == test_y).float().mean()
                accelerator.print("step: {}, test_loss: {:.4f}, test_acc: {:.3f}".format(step, test_loss.item(), test_acc.item()))

            logits = model(X)
            loss = F.cross_entropy(logits, y)

            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            step += 1

            if step % 10 == 0:
                acc = (logits.argmax(1) == y).float().mean()
                accelerator.print("epoch: {}, step: {}, loss: {:.4f}, acc: {:.3f}".format(epoch, step, loss.item(), acc.item()))

            if step % config["training"]["snapshot_freq"] == 0:
                states = [accelerator.unwrap_model(model).state_dict(), optimizer.state_dict()]
                accelerator.save(states, os.path.join(run_dir, "checkpoint_{}.pth".format(step)))

            if step >= config["training"]["n_iters"]:
                return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as run_dir:
        train(run_dir)
