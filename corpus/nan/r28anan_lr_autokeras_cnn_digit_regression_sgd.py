"""Digit-value regression with an AutoKeras-0.3 style generated CNN (cnn_mnist_regression example).

The network reads a 16x16 grey-scale digit and regresses its value (0..9) with MSE, trained by
a ModelTrainer-style loop: SGD with momentum and weight decay, validation MSE every epoch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

IMG = 16
N_TRAIN = 3072
N_VAL = 512
BATCH_SIZE = 64
MAX_EPOCHS = 4

# ModelTrainer defaults
LEARNING_RATE = 0.025
MOMENTUM = 0.9
WEIGHT_DECAY = 3e-4


def make_digits(n, templates):
    labels = torch.randint(0, 10, (n,))
    imgs = templates[labels].clone()
    shifts = torch.randint(-2, 3, (n, 2))
    for i in range(n):
        imgs[i] = torch.roll(imgs[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(0, 1))
    imgs = imgs * (0.7 + 0.6 * torch.rand(n, 1, 1)) + 0.15 * torch.randn(n, IMG, IMG)
    return (imgs * 255).clamp(0, 255).unsqueeze(1), labels.float()


def make_templates():
    t = (torch.rand(10, IMG, IMG) > 0.62).float()
    t = F.avg_pool2d(t.unsqueeze(1), 3, stride=1, padding=1).squeeze(1)
    return (t > 0.4).float()


class CnnGenerated(nn.Module):
    """ReLU-BN-Conv blocks with pooling, global average pooling, dropout and two dense layers."""

    def __init__(self, n_output=1, width=48):
        super().__init__()
        layers = []
        c_in = 1
        for i in range(3):
            layers += [nn.ReLU(), nn.BatchNorm2d(c_in), nn.Conv2d(c_in, width, 3, padding=1)]
            if i < 2:
                layers.append(nn.MaxPool2d(2))
            c_in = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.Dropout(0.25),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, n_output),
        )

    def forward(self, x):
        x = self.features(x)
        x = x.mean(dim=(2, 3))
        return self.head(x)


class ModelTrainer:
    def __init__(self, model, train_loader, test_loader, loss_function):
        self.model = model
        self.train_loader = train_loader
        self.test_loader = test_loader
        self.loss_function = loss_function
        self.optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE,
                                         momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    def _train(self, epoch):
        self.model.train()
        total = 0.0
        for batch_idx, (inputs, targets) in enumerate(self.train_loader):
            self.optimizer.zero_grad()
            outputs = self.model(inputs / 255.0).squeeze(1)
            loss = self.loss_function(outputs, targets)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
            if batch_idx % 12 == 0:
                print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f}")
        return total / len(self.train_loader)

    def _test(self):
        self.model.eval()
        preds, targs = [], []
        with torch.no_grad():
            for inputs, targets in self.test_loader:
                preds.append(self.model(inputs / 255.0).squeeze(1))
                targs.append(targets)
        preds = torch.cat(preds).numpy()
        targs = torch.cat(targs).numpy()
        test_loss = float(np.mean((preds - targs) ** 2))
        mae = float(np.mean(np.abs(preds - targs)))
        return test_loss, mae

    def train_model(self, max_epochs):
        for epoch in range(max_epochs):
            train_loss = self._train(epoch)
            test_loss, mae = self._test()
            print(f"epoch {epoch} train_loss {train_loss:.4f} val_mse {test_loss:.4f} val_mae {mae:.4f}")


def main():
    templates = make_templates()
    x_train, y_train = make_digits(N_TRAIN, templates)
    x_val, y_val = make_digits(N_VAL, templates)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=256)

    model = CnnGenerated()
    trainer = ModelTrainer(model, train_loader, test_loader, nn.MSELoss())
    trainer.train_model(MAX_EPOCHS)


if __name__ == "__main__":
    main()
