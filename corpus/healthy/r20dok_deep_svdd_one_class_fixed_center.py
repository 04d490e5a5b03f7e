"""One-class Deep SVDD (after lukasruff/Deep-SVDD-PyTorch) for anomaly detection on synthetic
16x16 images: the normal class is a horizontal bar at a random height, anomalies (test set
only) are vertical bars and blobs.

As in the reference code: bias-free conv net with affine-free BatchNorm, an autoencoder is
pretrained first and its encoder weights copied into the SVDD network, the hypersphere center c
is the mean of the initial network outputs (kept away from 0) and stays fixed, and the loss is
the mean squared distance of the outputs to c. Anomaly score = distance to c, evaluated by AUC.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

device = "cpu"
rep_dim = 32
ae_epochs = 4
n_epochs = 12
lr = 1e-3
weight_decay = 1e-6
lr_milestones = [8]
batch_size = 128


def draw(kind, gen):
    img = torch.zeros(16, 16)
    pos = int(torch.randint(3, 13, (1,), generator=gen))
    width = int(torch.randint(1, 3, (1,), generator=gen))
    if kind == 0:
        img[pos:pos + width, 2:14] = 1.0
    elif kind == 1:
        img[2:14, pos:pos + width] = 1.0
    else:
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        img = torch.exp(-((yy - pos) ** 2 + (xx - 8) ** 2) / 8.0)
    img = img + 0.1 * torch.randn(16, 16, generator=gen)
    return img.unsqueeze(0)


class OneClassShapes(Dataset):
    def __init__(self, n, train, gen):
        if train:
            kinds = torch.zeros(n, dtype=torch.long)
        else:
            kinds = torch.where(torch.rand(n, generator=gen) < 0.5, 0, torch.randint(1, 3, (n,), generator=gen))
        self.data = torch.stack([draw(int(k), gen) for k in kinds])
        self.targets = (kinds != 0).long()
        mean, std = self.data.mean(), self.data.std()
        self.data = (self.data - mean) / std

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.data[idx], self.targets[idx], idx


class ShapesLeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rep_dim = rep_dim
        self.pool = nn.MaxPool2d(2, 2)
        self.conv1 = nn.Conv2d(1, 8, 5, bias=False, padding=2)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-04, affine=False)
        self.conv2 = nn.Conv2d(8, 4, 5, bias=False, padding=2)
        self.bn2 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
        self.fc1 = nn.Linear(4 * 4 * 4, self.rep_dim, bias=False)

    def forward(self, x):
        x = self.pool(F.leaky_relu(self.bn1(self.conv1(x))))
        x = self.pool(F.leaky_relu(self.bn2(self.conv2(x))))
        x = x.view(x.size(0), -1)
        return self.fc1(x)


class ShapesLeNetAutoencoder(ShapesLeNet):
    def __init__(self):
        super().__init__()
        self.deconv1 = nn.ConvTranspose2d(2, 4, 5, bias=False, padding=2)
        self.bn3 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
        self.deconv2 = nn.ConvTranspose2d(4, 8, 5, bias=False, padding=2)
        self.bn4 = nn.BatchNorm2d(8, eps=1e-04, affine=False)
        self.deconv3 = nn.ConvTranspose2d(8, 1, 5, bias=False, padding=2)

    def forward(self, x):
        x = super().forward(x)
        x = x.view(x.size(0), 2, 4, 4)
        x = F.interpolate(F.leaky_relu(x), scale_factor=2)
        x = self.deconv1(x)
        x = F.interpolate(F.leaky_relu(self.bn3(x)), scale_factor=2)
        x = self.deconv2(x)
        x = F.leaky_relu(self.bn4(x))
        return self.deconv3(x)


def roc_auc_score(labels, scores):
    labels = torch.tensor(labels)
    ranks = torch.empty(len(scores))
    ranks[torch.tensor(scores).argsort()] = torch.arange(1, len(scores) + 1, dtype=torch.float)
    n_pos = labels.sum().item()
    n_neg = len(labels) - n_pos
    return (ranks[labels == 1].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def test_scores(net, loader, c=None):
    net.eval()
    labels, scores = [], []
    with torch.no_grad():
        for inputs, y, _ in loader:
            outputs = net(inputs)
            if c is None:
                s = torch.sum((outputs - inputs) ** 2, dim=tuple(range(1, outputs.dim())))
            else:
                s = torch.sum((outputs - c) ** 2, dim=1)
            labels += y.tolist()
            scores += s.tolist()
    net.train()
    return roc_auc_score(labels, scores)


def pretrain(ae_net, train_loader, test_loader):
    optimizer = optim.Adam(ae_net.parameters(), lr=lr, weight_decay=weight_decay)
    ae_net.train()
    for epoch in range(ae_epochs):
        loss_epoch, n_batches = 0.0, 0
        for inputs, _, _ in train_loader:
            optimizer.zero_grad()
            outputs = ae_net(inputs)
            scores = torch.sum((outputs - inputs) ** 2, dim=tuple(range(1, outputs.dim())))
            loss = torch.mean(scores)
            loss.backward()
            optimizer.step()
            loss_epoch += loss.item()
            n_batches += 1
        print(f"  AE epoch {epoch + 1}/{ae_epochs}\t Loss: {loss_epoch / n_batches:.4f}")
    print(f"  AE test AUC: {100. * test_scores(ae_net, test_loader):.2f}%")


def init_center_c(train_loader, net, eps=0.1):
    n_samples = 0
    c = torch.zeros(net.rep_dim, device=device)
    net.eval()
    with torch.no_grad():
        for inputs, _, _ in train_loader:
            outputs = net(inputs)
            n_samples += outputs.shape[0]
            c += torch.sum(outputs, dim=0)
    c /= n_samples
    c[(abs(c) < eps) & (c < 0)] = -eps
    c[(abs(c) < eps) & (c > 0)] = eps
    return c


g = torch.Generator().manual_seed(1)
train_set = OneClassShapes(2048, True, g)
test_set = OneClassShapes(600, False, g)
train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
test_loader = DataLoader(test_set, batch_size=batch_size)

start = time.time()
print("Pretraining autoencoder...")
ae_net = ShapesLeNetAutoencoder()
pretrain(ae_net, train_loader, test_loader)

net = ShapesLeNet()
net_dict = net.state_dict()
ae_net_dict = {k: v for k, v in ae_net.state_dict().items() if k in net_dict}
net_dict.update(ae_net_dict)
net.load_state_dict(net_dict)

print("Training Deep SVDD...")
optimizer = optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=lr_milestones, gamma=0.1)
c = init_center_c(train_loader, net)
print(f"  center c initialized: |c| = {c.norm():.3f}; test AUC before training: {100. * test_scores(net, test_loader, c):.2f}%")
net.train()
for epoch in range(n_epochs):
    loss_epoch, n_batches = 0.0, 0
    for inputs, _, _ in train_loader:
        optimizer.zero_grad()
        outputs = net(inputs)
        dist = torch.sum((outputs - c) ** 2, dim=1)
        loss = torch.mean(dist)
        loss.backward()
        optimizer.step()
        loss_epoch += loss.item()
        n_batches += 1
    scheduler.step()
    print(f"  Epoch {epoch + 1}/{n_epochs}\t Loss: {loss_epoch / n_batches:.5f}\t lr {scheduler.get_last_lr()[0]:g}")
    if (epoch + 1) % 4 == 0:
        print(f"  Test AUC: {100. * test_scores(net, test_loader, c):.2f}%")
print(f"Finished training in {time.time() - start:.1f}s")
