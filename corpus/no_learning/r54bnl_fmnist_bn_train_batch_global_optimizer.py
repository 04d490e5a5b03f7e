"""FashionMNIST-style comparison (book chapter 3): the same MLP trained without and with
batch normalization on the same inputs."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
device = 'cpu'

# synthetic stand-in for FMNIST: 10 classes of 28x28 images built from class prototypes
g = torch.Generator().manual_seed(0)
prototypes = torch.rand(10, 28 * 28, generator=g)
tr_targets = torch.randint(0, 10, (3200,), generator=g)
val_targets = torch.randint(0, 10, (800,), generator=g)
tr_images = (0.6 * prototypes[tr_targets] + 0.4 * torch.rand(3200, 28 * 28, generator=g)) * 255
val_images = (0.6 * prototypes[val_targets] + 0.4 * torch.rand(800, 28 * 28, generator=g)) * 255


class FMNISTDataset(Dataset):
    def __init__(self, x, y):
        x = x.float() / 255
        self.x, self.y = x, y

    def __getitem__(self, ix):
        return self.x[ix].to(device), self.y[ix].to(device)

    def __len__(self):
        return len(self.x)


def get_data():
    train = FMNISTDataset(tr_images, tr_targets)
    trn_dl = DataLoader(train, batch_size=32, shuffle=True)
    val = FMNISTDataset(val_images, val_targets)
    val_dl = DataLoader(val, batch_size=len(val_images), shuffle=False)
    return trn_dl, val_dl


def get_model(batch_norm):
    class neuralnet(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_to_hidden_layer = nn.Linear(784, 1000)
            self.batch_norm = nn.BatchNorm1d(1000) if batch_norm else nn.Identity()
            self.hidden_layer_activation = nn.ReLU()
            self.hidden_to_output_layer = nn.Linear(1000, 10)

        def forward(self, x):
            x = self.input_to_hidden_layer(x)
            x = self.batch_norm(x)
            x = self.hidden_layer_activation(x)
            return self.hidden_to_output_layer(x)

    model = neuralnet().to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loss_fn, optimizer


def train_batch(x, y, model, opt, loss_fn):
    model.train()
    prediction = model(x)
    batch_loss = loss_fn(prediction, y)
    batch_loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return batch_loss.item()


@torch.no_grad()
def accuracy(x, y, model):
    model.eval()
    prediction = model(x)
    max_values, argmaxes = prediction.max(-1)
    is_correct = argmaxes == y
    return is_correct.cpu().numpy().tolist()


trn_dl, val_dl = get_data()

# baseline without batch normalization
model, loss_fn, optimizer = get_model(batch_norm=False)
for epoch in range(1):
    losses = [train_batch(x, y, model, optimizer, loss_fn) for x, y in trn_dl]
    val_acc = np.mean([a for x, y in val_dl for a in accuracy(x, y, model)])
    print(f"[no BN] epoch {epoch + 1} train loss {np.mean(losses):.4f} val acc {val_acc:.3f}")

# same network with batch normalization after the hidden layer
bn_model, bn_loss_fn, bn_optimizer = get_model(batch_norm=True)
for epoch in range(2):
    losses = [train_batch(x, y, bn_model, bn_optimizer, bn_loss_fn) for x, y in trn_dl]
    trn_acc = np.mean([a for x, y in trn_dl for a in accuracy(x, y, bn_model)])
    val_acc = np.mean([a for x, y in val_dl for a in accuracy(x, y, bn_model)])
    print(f"[BN] epoch {epoch + 1} train loss {np.mean(losses):.4f} first-20 {np.mean(losses[:20]):.4f} "
          f"last-20 {np.mean(losses[-20:]):.4f} train acc {trn_acc:.3f} val acc {val_acc:.3f}")
