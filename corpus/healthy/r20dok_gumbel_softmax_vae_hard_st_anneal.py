"""Categorical VAE with the Gumbel-Softmax trick (after YongfeiYan/Gumbel_Softmax_VAE), on
synthetic 16x16 binary "glyph" images built from a few random stroke prototypes.

The encoder gives latent_dim x categorical_dim logits; samples are drawn with Gumbel noise and a
temperature that is annealed every 20 batches, and with hard=True the forward pass uses the
one-hot argmax while gradients flow through the soft sample (straight-through). Loss is the
per-image summed BCE plus the KL to a uniform categorical prior.
"""
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(7)

batch_size = 100
epochs = 10
temp = 1.0
hard = True
latent_dim = 8
categorical_dim = 6
temp_min = 0.5
ANNEAL_RATE = 0.0005
input_dim = 256


def make_glyphs(n, protos, gen):
    a = torch.randint(0, 12, (n,), generator=gen)
    b = torch.randint(0, 12, (n,), generator=gen)
    top = torch.zeros(n, 16, 16)
    top[:, :8] = protos[a][:, :8]
    top[:, 8:] = protos[b][:, 8:]
    flip = torch.rand(n, 16, 16, generator=gen) < 0.03
    imgs = torch.where(flip, 1 - top, top)
    return imgs.view(n, -1)


g = torch.Generator().manual_seed(0)
protos = (torch.rand(12, 16, 16, generator=g) < 0.25).float()
train_loader = DataLoader(TensorDataset(make_glyphs(6000, protos, g)), batch_size=batch_size, shuffle=True)
test_loader = DataLoader(TensorDataset(make_glyphs(1000, protos, g)), batch_size=batch_size)


def sample_gumbel(shape, eps=1e-20):
    U = torch.rand(shape)
    return -torch.log(-torch.log(U + eps) + eps)


def gumbel_softmax_sample(logits, temperature):
    y = logits + sample_gumbel(logits.size())
    return F.softmax(y / temperature, dim=-1)


def gumbel_softmax(logits, temperature, hard=False):
    y = gumbel_softmax_sample(logits, temperature)
    if not hard:
        return y.view(-1, latent_dim * categorical_dim)
    shape = y.size()
    _, ind = y.max(dim=-1)
    y_hard = torch.zeros_like(y).view(-1, shape[-1])
    y_hard.scatter_(1, ind.view(-1, 1), 1)
    y_hard = y_hard.view(*shape)
    y_hard = (y_hard - y).detach() + y
    return y_hard.view(-1, latent_dim * categorical_dim)


class VAE_gumbel(nn.Module):
    def __init__(self, temp):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, latent_dim * categorical_dim)
        self.fc4 = nn.Linear(latent_dim * categorical_dim, 128)
        self.fc5 = nn.Linear(128, 256)
        self.fc6 = nn.Linear(256, input_dim)
        self.relu = nn.ReLU()
        self.sigmoid = nn.Sigmoid()

    def encode(self, x):
        h1 = self.relu(self.fc1(x))
        h2 = self.relu(self.fc2(h1))
        return self.fc3(h2)

    def decode(self, z):
        h4 = self.relu(self.fc4(z))
        h5 = self.relu(self.fc5(h4))
        return self.sigmoid(self.fc6(h5))

    def forward(self, x, temp, hard):
        q = self.encode(x.view(-1, input_dim))
        q_y = q.view(q.size(0), latent_dim, categorical_dim)
        z = gumbel_softmax(q_y, temp, hard)
        return self.decode(z), F.softmax(q_y, dim=-1).reshape(*q.size())


model = VAE_gumbel(temp)
optimizer = optim.Adam(model.parameters(), lr=2e-3)


def loss_function(recon_x, x, qy):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, input_dim), reduction="sum") / x.shape[0]
    log_ratio = torch.log(qy * categorical_dim + 1e-20)
    KLD = torch.sum(qy * log_ratio, dim=-1).mean()
    return BCE + KLD, BCE, KLD


def train(epoch):
    global temp
    model.train()
    train_loss = 0
    for batch_idx, (data,) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, qy = model(data, temp, hard)
        loss, bce, kld = loss_function(recon_batch, data, qy)
        loss.backward()
        train_loss += loss.item() * len(data)
        optimizer.step()
        if batch_idx % 20 == 1:
            temp = np.maximum(temp * np.exp(-ANNEAL_RATE * batch_idx), temp_min)
        if batch_idx % 20 == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.3f} (bce {bce.item():.3f} kld {kld.item():.4f}) temp {temp:.4f}")
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for (data,) in test_loader:
            recon_batch, qy = model(data, temp, hard)
            test_loss += loss_function(recon_batch, data, qy)[0].item() * len(data)
    print(f"====> Test set loss: {test_loss / len(test_loader.dataset):.4f}")


start = time.time()
for epoch in range(1, epochs + 1):
    train(epoch)
    test(epoch)
print(f"done in {time.time() - start:.1f}s")
