"""MNIST-style digit classifier trained with a config-driven Trainer (pytorch-template layout).

The optimizer and the lr scheduler are built from the config by name, so switching the
schedule is a config change: here StepLR was swapped for ReduceLROnPlateau.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

logging.basicConfig(level=logging.INFO, format="%(message)s")
torch.manual_seed(123)
np.random.seed(123)

config = {
    "name": "Mnist_LeNet",
    "data_loader": {"batch_size": 64, "validation_split": 0.1, "shuffle": True},
    "optimizer": {"type": "Adam", "args": {"lr": 0.003, "weight_decay": 0, "amsgrad": True}},
    "loss": "nll_loss",
    "metrics": ["accuracy", "top_k_acc"],
    "lr_scheduler": {"type": "ReduceLROnPlateau", "args": {"mode": "min", "factor": 0.1, "patience": 2}},
    "trainer": {"epochs": 5, "log_step": 10},
}


class SyntheticDigits(Dataset):
    """28x28 'digits': each class is a noisy stroke template."""

    def __init__(self, n=3200, seed=0):
        g = torch.Generator().manual_seed(seed)
        templates = (torch.rand(10, 1, 28, 28, generator=g) > 0.7).float()
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.data = templates[self.targets] + 0.5 * torch.randn(n, 1, 28, 28, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.data[idx], self.targets[idx]


class MnistModel(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def nll_loss(output, target):
    return F.nll_loss(output, target)


def accuracy(output, target):
    with torch.no_grad():
        pred = torch.argmax(output, dim=1)
        return torch.sum(pred == target).item() / len(target)


def top_k_acc(output, target, k=3):
    with torch.no_grad():
        pred = torch.topk(output, k, dim=1)[1]
        return sum(torch.sum(pred[:, i] == target).item() for i in range(k)) / len(target)


class MetricTracker:
    def __init__(self, *keys):
        self._data = {k: [0.0, 0] for k in keys}

    def reset(self):
        for k in self._data:
            self._data[k] = [0.0, 0]

    def update(self, key, value, n=1):
        self._data[key][0] += value * n
        self._data[key][1] += n

    def result(self):
        return {k: total / max(count, 1) for k, (total, count) in self._data.items()}


class BaseTrainer:
    def __init__(self, model, criterion, metric_ftns, optimizer, config):
        self.config = config
        self.logger = logging.getLogger("trainer")
        self.model = model
        self.criterion = criterion
        self.metric_ftns = metric_ftns
        self.optimizer = optimizer
        self.epochs = config["trainer"]["epochs"]
        self.start_epoch = 1

    def train(self):
        for epoch in range(self.start_epoch, self.epochs + 1):
            result = self._train_epoch(epoch)
            log = {"epoch": epoch}
            log.update(result)
            for key, value in log.items():
                self.logger.info("    {:15s}: {}".format(str(key), value))


class Trainer(BaseTrainer):
    def __init__(self, model, criterion, metric_ftns, optimizer, config, data_loader,
                 valid_data_loader=None, lr_scheduler=None):
        super().__init__(model, criterion, metric_ftns, optimizer, config)
        self.data_loader = data_loader
        self.len_epoch = len(self.data_loader)
        self.valid_data_loader = valid_data_loader
        self.do_validation = self.valid_data_loader is not None
        self.lr_scheduler = lr_scheduler
        self.log_step = config["trainer"]["log_step"]
        self.train_metrics = MetricTracker("loss", *[m.__name__ for m in self.metric_ftns])
        self.valid_metrics = MetricTracker("loss", *[m.__name__ for m in self.metric_ftns])

    def _train_epoch(self, epoch):
        self.model.train()
        self.train_metrics.reset()
        for batch_idx, (data, target) in enumerate(self.data_loader):
            self.optimizer.zero_grad()
            output = self.model(data)
            loss = self.criterion(output, target)
            loss.backward()
            self.optimizer.step()

            self.train_metrics.update("loss", loss.item())
            for met in self.metric_ftns:
                self.train_metrics.update(met.__name__, met(output, target))

            if batch_idx % self.log_step == 0:
                self.logger.info("Train Epoch: {} [{}/{}] Loss: {:.6f}".format(
                    epoch, batch_idx, self.len_epoch, loss.item()))
        log = self.train_metrics.result()

        if self.do_validation:
            val_log = self._valid_epoch(epoch)
            log.update(**{"val_" + k: v for k, v in val_log.items()})

        if self.lr_scheduler is not None:
            self.lr_scheduler.step()
        return log

    def _valid_epoch(self, epoch):
        self.model.eval()
        self.valid_metrics.reset()
        with torch.no_grad():
            for batch_idx, (data, target) in enumerate(self.valid_data_loader):
                output = self.model(data)
                loss = self.criterion(output, target)
                self.valid_metrics.update("loss", loss.item())
                for met in self.metric_ftns:
                    self.valid_metrics.update(met.__name__, met(output, target))
        return self.valid_metrics.result()


def main(config):
    logger = logging.getLogger("train")
    dataset = SyntheticDigits()
    n_valid = int(len(dataset) * config["data_loader"]["validation_split"])
    train_set, valid_set = random_split(dataset, [len(dataset) - n_valid, n_valid])
    data_loader = DataLoader(train_set, batch_size=config["data_loader"]["batch_size"],
                             shuffle=config["data_loader"]["shuffle"])
    valid_data_loader = DataLoader(valid_set, batch_size=config["data_loader"]["batch_size"])

    model = MnistModel()
    logger.info(model)

    criterion = globals()[config["loss"]]
    metrics = [globals()[met] for met in config["metrics"]]

    trainable_params = filter(lambda p: p.requires_grad, model.parameters())
    optimizer = getattr(torch.optim, config["optimizer"]["type"])(trainable_params, **config["optimizer"]["args"])
    lr_scheduler = getattr(torch.optim.lr_scheduler, config["lr_scheduler"]["type"])(
        optimizer, **config["lr_scheduler"]["args"])

    trainer = Trainer(model, criterion, metrics, optimizer,
                      config=config,
                      data_loader=data_loader,
                      valid_data_loader=valid_data_loader,
                      lr_scheduler=lr_scheduler)
    trainer.train()


if __name__ == "__main__":
    main(config)
