"""VAE example (pytorch/examples vae/main.py), run offline.

MNIST is replaced by synthetic 28x28 images in [0, 1]: soft strokes (bars and
rings) at random positions. The model (784-400-20), the reparameterization,
Adam lr=1e-3 and the loss (BCE with reduction='sum' plus the KL term, summed over
the batch) are the example's; save_image is left out, so nothing is written.
"""
from __future__ import print_function
import argparse
import math

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import TensorDataset

parser = argparse.ArgumentParser(description='VAE MNIST Example')
parser.add_argument('--batch-size', type=int, default=128, metavar='N',
                    help='input batch size for training (default: 128)')
parser.add_argument('--epochs', type=int, default=8, metavar='N',
                    help='number of epochs to train (default: 8)')
parser.add_argument('--seed', type=int, default=1, metavar='S',
                    help='random seed (default: 1)')
parser.add_argument('--log-interval', type=int, default=5, metavar='N',
                    help='how many batches to wait before logging training status')
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
print(f"Using device: {device}")


def make_images(n, seed):
    """Each image: one thick bar at a random angle and one ring, both soft-edged."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    imgs = torch.empty(n, 1, 28, 28)
    for i in range(n):
        cy, cx = (torch.rand(2, generator=g) * 10 + 9).tolist()
        theta = float(torch.rand(1, generator=g)) * math.pi
        dist = (xx - cx) * math.sin(theta) - (yy - cy) * math.cos(theta)
        along = (xx - cx) * math.cos(theta) + (yy - cy) * math.sin(theta)
        bar = torch.sigmoid(3.0 * (1.5 - dist.abs())) * torch.sigmoid(2.0 * (8.0 - along.abs()))
        ry, rx = (torch.rand(2, generator=g) * 12 + 8).tolist()
        radius = float(torch.rand(1, generator=g)) * 4 + 3
        r = ((xx - rx) ** 2 + (yy - ry) ** 2).sqrt()
        ring = torch.sigmoid(3.0 * (1.2 - (r - radius).abs()))
        imgs[i, 0] = torch.maximum(bar, ring)
    return imgs


x_train = make_images(2560, seed=0)
x_test = make_images(512, seed=1)
train_loader = torch.utils.data.DataLoader(
    TensorDataset(x_train, torch.zeros(len(x_train))),
    batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(
    TensorDataset(x_test, torch.zeros(len(x_test))),
    batch_size=args.batch_size, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()

        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5*logvar)
        eps = torch.randn_like(std)
        return mu + eps*std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader),
                loss.item() / len(data)))

    print('====> Epoch: {} Average loss: {:.4f}'.format(
          epoch, train_loss / len(train_loader.dataset)))


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()

    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.4f}'.format(test_loss))


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20).to(device)
            sample = model.decode(sample).cpu()
            print('sample mean intensity {:.3f}'.format(sample.mean().item()))
