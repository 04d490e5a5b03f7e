"""Retiarii-style trial: a sampled CNN from the model space is handed to an
image-classification trainer that builds the data loaders and the optimizer from
their class names and kwargs, trains for max_epochs and reports val accuracy."""
from typing import Any, Dict, List, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


class SyntheticDigits(Dataset):
    """28x28 grey images, 10 classes, each class a blurred stroke pattern plus noise."""

    def __init__(self, train=True, n=1600, noise=0.8):
        g = torch.Generator().manual_seed(1)
        self.protos = F.avg_pool2d(torch.randn(10, 1, 28, 28, generator=g), 3, 1, 1) * 2.0
        g2 = torch.Generator().manual_seed(2 if train else 3)
        self.targets = torch.randint(0, 10, (n,), generator=g2)
        self.data = self.protos[self.targets] + noise * torch.randn(n, 1, 28, 28, generator=g2)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.data[idx], self.targets[idx]


DATASETS = {'SyntheticDigits': SyntheticDigits}


def report_intermediate_result(metric):
    print(f'[trial] intermediate result: {metric}')


def report_final_result(metric):
    print(f'[trial] final result: {metric}')


class Net(nn.Module):
    """One sample of the model space: conv(k=5, 16) -> conv(k=3, 32) -> fc(64)."""

    def __init__(self, conv1_out=16, conv2_k=3, hidden=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, conv1_out, 5, 1, 2)
        self.conv2 = nn.Conv2d(conv1_out, 32, conv2_k, 1, conv2_k // 2)
        self.fc1 = nn.Linear(32 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class PyTorchImageClassificationTrainer:
    """Image classification trainer for PyTorch.

    A model, along with corresponding dataset, optimizer config is used to initialize the trainer.
    The trainer will run for a fixed number of epochs and report the final result.
    """

    def __init__(self, model, dataset_cls='SyntheticDigits', dataset_kwargs=None, dataloader_kwargs=None,
                 optimizer_cls='SGD', optimizer_kwargs=None, trainer_kwargs=None):
        self.model = model
        self._loss_fn = nn.CrossEntropyLoss()
        self._train_dataset = DATASETS[dataset_cls](train=True, **(dataset_kwargs or {}))
        self._val_dataset = DATASETS[dataset_cls](train=False, n=400, **(dataset_kwargs or {}))
        self._optimizer = getattr(torch.optim, optimizer_cls)(model.parameters(), **(optimizer_kwargs or {}))
        self._trainer_kwargs = trainer_kwargs or {'max_epochs': 10}
        self._train_dataloader = DataLoader(self._train_dataset, shuffle=True, **(dataloader_kwargs or {}))
        self._val_dataloader = DataLoader(self._val_dataset, **(dataloader_kwargs or {}))

    def _accuracy(self, input, target):
        _, predict = torch.max(input.data, 1)
        correct = predict.eq(target.data).cpu().sum().item()
        return correct / input.size(0)

    def training_step(self, batch: Tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        x, y = batch
        y_hat = self.model(x)
        loss = self._loss_fn(y_hat, y)
        return loss

    def validation_step(self, batch: Tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        y_hat = self.model(x)
        return {'val_acc': self._accuracy(y_hat, y), 'val_loss': self._loss_fn(y_hat, y).item()}

    def validation_epoch_end(self, outputs: List[Dict[str, Any]]) -> Dict[str, Any]:
        avg_acc = np.mean([x['val_acc'] for x in outputs]).item()
        avg_loss = np.mean([x['val_loss'] for x in outputs]).item()
        report_intermediate_result({'val_acc': round(avg_acc, 4), 'val_loss': round(avg_loss, 4)})
        return {'val_acc': avg_acc}

    def _validate(self):
        self.model.eval()
        validation_outputs = []
        with torch.no_grad():
            for i, batch in enumerate(self._val_dataloader):
                validation_outputs.append(self.validation_step(batch, i))
        return self.validation_epoch_end(validation_outputs)

    def _train(self, epoch):
        self.model.train()
        running = 0.0
        for i, batch in enumerate(self._train_dataloader):
            self._optimizer.zero_grad()
            loss = self.training_step(batch, i)
            loss.backward()
            running += loss.item()
            if (i + 1) % 25 == 0:
                print(f'epoch {epoch} step {i + 1}: train loss {running / 25:.4f}')
                running = 0.0

    def fit(self) -> None:
        for epoch in range(self._trainer_kwargs['max_epochs']):
            self._train(epoch)
            self._validate()
        report_final_result(self._validate()['val_acc'])


if __name__ == '__main__':
    model = Net(conv1_out=16, conv2_k=3, hidden=64)
    trainer = PyTorchImageClassificationTrainer(
        model,
        dataset_cls='SyntheticDigits',
        dataloader_kwargs={'batch_size': 32},
        optimizer_cls='SGD',
        optimizer_kwargs={'lr': 0.05, 'momentum': 0.9},
        trainer_kwargs={'max_epochs': 4},
    )
    trainer.fit()
