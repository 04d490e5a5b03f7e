"""Tabular classification pipeline in the style of Auto-PyTorch: a shaped MLP backbone, a
trainer object that owns the optimizer and the learning-rate scheduler, and an epoch loop that
reports train/validation loss and balanced accuracy."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)


def make_tabular_data(n=1600, n_num=10, n_cat=3, n_classes=3):
    X_num = np.random.randn(n, n_num).astype(np.float32)
    X_cat = np.random.randint(0, 4, size=(n, n_cat))
    W = np.random.randn(n_num, n_classes)
    logits = np.tanh(X_num) @ W * 1.5 + (X_num[:, :3] ** 2) @ np.random.randn(3, n_classes)
    logits += np.eye(4)[X_cat[:, 0]] @ np.random.randn(4, n_classes)
    y = logits.argmax(1)
    X = np.concatenate([X_num, np.eye(4)[X_cat].reshape(n, -1)], axis=1).astype(np.float32)
    return X, y


class ShapedMLPBackbone(nn.Module):
    def __init__(self, in_features, num_groups=3, max_units=64, out_features=3):
        super().__init__()
        units = np.linspace(max_units, max_units // 2, num_groups).astype(int)
        layers, prev = [], in_features
        for u in units:
            layers += [nn.Linear(prev, int(u)), nn.ReLU()]
            prev = int(u)
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(prev, out_features)

    def forward(self, x):
        return self.head(self.backbone(x))


class StandardTrainer:
    def __init__(self, model, optimizer, scheduler, criterion):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.criterion = criterion

    def data_preparation(self, X, y):
        return X, {"y_a": y}

    def criterion_preparation(self, y_a):
        return lambda criterion, pred: criterion(pred, y_a)

    def train_step(self, data, targets):
        data = data.float()
        targets = targets.long()
        data, criterion_kwargs = self.data_preparation(data, targets)

        self.optimizer.zero_grad()
        outputs = self.model(data)
        loss_func = self.criterion_preparation(**criterion_kwargs)
        loss = loss_func(self.criterion, outputs)
        loss.backward()
        self.optimizer.step()
        if self.scheduler:
            if "ReduceLROnPlateau" in self.scheduler.__class__.__name__:
                self.scheduler.step(loss)
            else:
                self.scheduler.step()
        return loss.item(), outputs

    def train_epoch(self, train_loader):
        loss_sum, N = 0.0, 0
        self.model.train()
        for step, (data, targets) in enumerate(train_loader):
            loss, outputs = self.train_step(data, targets)
            loss_sum += loss * data.size(0)
            N += data.size(0)
        return loss_sum / N

    def evaluate(self, loader):
        self.model.eval()
        loss_sum, N, preds, ys = 0.0, 0, [], []
        with torch.no_grad():
            for data, targets in loader:
                out = self.model(data.float())
                loss_sum += self.criterion(out, targets.long()).item() * data.size(0)
                N += data.size(0)
                preds.append(out.argmax(1))
                ys.append(targets)
        preds, ys = torch.cat(preds), torch.cat(ys)
        recalls = [(preds[ys == c] == c).float().mean().item() for c in ys.unique()]
        self.model.train()
        return loss_sum / N, float(np.mean(recalls))


X, y = make_tabular_data()
mean, std = X[:1200].mean(0), X[:1200].std(0) + 1e-8
X = (X - mean) / std
train_ds = TensorDataset(torch.from_numpy(X[:1200]), torch.from_numpy(y[:1200]))
val_ds = TensorDataset(torch.from_numpy(X[1200:]), torch.from_numpy(y[1200:]))
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)

model = ShapedMLPBackbone(X.shape[1])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.0)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
trainer = StandardTrainer(model, optimizer, scheduler, nn.CrossEntropyLoss())

for epoch in range(1, 8):
    train_loss = trainer.train_epoch(train_loader)
    val_loss, val_bacc = trainer.evaluate(val_loader)
    print(f"epoch {epoch}: train loss {train_loss:.4f} | val loss {val_loss:.4f} | "
          f"val balanced acc {val_bacc:.3f} | lr {optimizer.param_groups[0]['lr']:.2e}")
