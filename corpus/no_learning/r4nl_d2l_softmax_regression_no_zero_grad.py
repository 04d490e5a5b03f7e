"""Softmax regression on a Fashion-MNIST-like data set, written after the d2l chapter.

The images are 28x28 grey "clothes": tops, bottoms and shoes share a coarse silhouette and
each class adds its own details; some garments look like another class of their group
(a shirt that looks like a t-shirt), so a linear model cannot get every image right.
The real data set is not downloaded here.
"""
import torch
from torch import nn
from torch.utils import data

torch.manual_seed(0)

TEXT_LABELS = ['t-shirt', 'trouser', 'pullover', 'dress', 'coat',
               'sandal', 'shirt', 'sneaker', 'bag', 'ankle boot']


GROUPS = [0, 1, 0, 0, 0, 2, 0, 2, 1, 2]
LOOKALIKE = [6, 3, 4, 1, 2, 7, 0, 9, 1, 5]


def blob_image(g, n_blobs, size):
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing='ij')
    img = torch.zeros(28, 28)
    for _ in range(n_blobs):
        cy, cx = torch.randint(6, 22, (2,), generator=g).float()
        sy, sx = torch.rand(2, generator=g) * size + 2
        img += torch.exp(-((yy - cy) ** 2 / (2 * sy ** 2) + (xx - cx) ** 2 / (2 * sx ** 2)))
    return img / img.max()


def make_templates():
    g = torch.Generator().manual_seed(42)
    silhouettes = [blob_image(g, 4, 5) for _ in range(3)]
    return torch.stack([0.7 * silhouettes[GROUPS[k]] + 0.3 * blob_image(g, 2, 4) for k in range(10)])


class FakeFashionMNIST(data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        templates = make_templates()
        self.labels = torch.randint(0, 10, (n,), generator=g)
        odd = torch.rand(n, generator=g) < 0.15
        looks_like = torch.where(odd, torch.tensor(LOOKALIKE)[self.labels], self.labels)
        contrast = 0.6 + 0.8 * torch.rand(n, 1, 1, generator=g)
        imgs = templates[looks_like] * contrast + 0.5 * torch.randn(n, 28, 28, generator=g)
        self.images = imgs.clamp(0, 1).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def load_data_fashion_mnist(batch_size):
    mnist_train = FakeFashionMNIST(20480, seed=1)
    mnist_test = FakeFashionMNIST(2000, seed=2)
    return (data.DataLoader(mnist_train, batch_size, shuffle=True),
            data.DataLoader(mnist_test, batch_size, shuffle=False))


class Accumulator:
    """For accumulating sums over n variables."""
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def accuracy(y_hat, y):
    """Compute the number of correct predictions."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


def evaluate_accuracy(net, data_iter):
    if isinstance(net, torch.nn.Module):
        net.eval()
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def train_epoch(net, train_iter, loss, updater):
    net.train()
    metric = Accumulator(3)
    for X, y in train_iter:
        y_hat = net(X)
        l = loss(y_hat, y)
        l.mean().backward()
        updater.step()
        metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
    return metric[0] / metric[2], metric[1] / metric[2]


def train(net, train_iter, test_iter, loss, num_epochs, updater):
    for epoch in range(num_epochs):
        train_loss, train_acc = train_epoch(net, train_iter, loss, updater)
        test_acc = evaluate_accuracy(net, test_iter)
        print(f'epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}')


batch_size = 256
train_iter, test_iter = load_data_fashion_mnist(batch_size)

net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))


def init_weights(m):
    if type(m) == nn.Linear:
        nn.init.normal_(m.weight, std=0.01)


net.apply(init_weights)

loss = nn.CrossEntropyLoss(reduction='none')
trainer = torch.optim.SGD(net.parameters(), lr=0.1)

num_epochs = 4
train(net, train_iter, test_iter, loss, num_epochs, trainer)
