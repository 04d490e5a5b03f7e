"""Batch normalization from scratch (Dive into Deep Learning, 8.5), applied to LeNet.

The BatchNorm layer keeps its own moving mean and variance for prediction mode and is trained
inside LeNet on a Fashion-MNIST-like set of 28x28 greyscale images (synthetic here: ten
garment-like silhouettes with random shifts, contrast and noise).
"""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


def batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
    # Use is_grad_enabled to determine whether we are in training mode
    if not torch.is_grad_enabled():
        # In prediction mode, use mean and variance obtained by moving average
        X_hat = (X - moving_mean) / torch.sqrt(moving_var + eps)
    else:
        assert len(X.shape) in (2, 4)
        if len(X.shape) == 2:
            # When using a fully connected layer, calculate the mean and variance on the feature dimension
            mean = X.mean(dim=0)
            var = ((X - mean) ** 2).mean(dim=0)
        else:
            # When using a two-dimensional convolutional layer, calculate the mean and variance on the
            # channel dimension (axis=1)
            mean = X.mean(dim=(0, 2, 3), keepdim=True)
            var = ((X - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
        # In training mode, the current mean and variance are used
        X_hat = (X - mean) / torch.sqrt(var + eps)
        # Update the mean and variance using moving average
        moving_mean = momentum * moving_mean + (1.0 - momentum) * mean
        moving_var = momentum * moving_var + (1.0 - momentum) * var
    Y = gamma * X_hat + beta  # Scale and shift
    return Y, moving_mean, moving_var


class BatchNorm(nn.Module):
    # num_features: the number of outputs for a fully connected layer or the number of output
    # channels for a convolutional layer. num_dims: 2 for a fully connected layer and 4 for a
    # convolutional layer
    def __init__(self, num_features, num_dims):
        super().__init__()
        if num_dims == 2:
            shape = (1, num_features)
        else:
            shape = (1, num_features, 1, 1)
        # The scale parameter and the shift parameter (model parameters) are initialized to 1 and 0
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        # The variables that are not model parameters are initialized to 0 and 1
        self.moving_mean = torch.zeros(shape)
        self.moving_var = torch.ones(shape)

    def forward(self, X):
        # Save the updated moving_mean and moving_var
        Y, self.moving_mean, self.moving_var = batch_norm(
            X, self.gamma, self.beta, self.moving_mean,
            self.moving_var, eps=1e-5, momentum=0.9)
        return Y


def make_fashion_like(n, generator):
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    labels = torch.randint(0, 10, (n,), generator=generator)
    cx = 14 + torch.randint(-3, 4, (n, 1, 1), generator=generator)
    cy = 14 + torch.randint(-3, 4, (n, 1, 1), generator=generator)
    w = (4 + labels % 5 * 1.5).view(-1, 1, 1)
    h = (6 + labels // 5 * 5).view(-1, 1, 1)
    body = ((xx - cx).abs() < w) & ((yy - cy).abs() < h)
    sleeves = ((yy - cy + h / 2).abs() < 2) & ((xx - cx).abs() < w + 2 * (labels.view(-1, 1, 1) % 3))
    img = (body | sleeves).float() * (0.5 + 0.5 * torch.rand(n, 1, 1, generator=generator))
    img = img + 0.15 * torch.randn(n, 28, 28, generator=generator)
    return img.unsqueeze(1), labels


def load_data_fashion_mnist(batch_size):
    g = torch.Generator().manual_seed(1)
    X_train, y_train = make_fashion_like(10240, g)
    X_test, y_test = make_fashion_like(2048, g)
    return (DataLoader(TensorDataset(X_train, y_train), batch_size, shuffle=True),
            DataLoader(TensorDataset(X_test, y_test), batch_size, shuffle=False))


def accuracy(y_hat, y):
    return (y_hat.argmax(axis=1) == y).float().sum().item()


def evaluate_accuracy(net, data_iter):
    net.eval()
    correct, total = 0.0, 0
    with torch.no_grad():
        for X, y in data_iter:
            correct += accuracy(net(X), y)
            total += y.numel()
    return correct / total


def train_ch6(net, train_iter, test_iter, num_epochs, lr):
    def init_weights(m):
        if type(m) == nn.Linear or type(m) == nn.Conv2d:
            nn.init.xavier_uniform_(m.weight)
    net.apply(init_weights)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss()
    num_batches = len(train_iter)
    for epoch in range(num_epochs):
        start = time.time()
        net.train()
        metric_loss, metric_acc, n = 0.0, 0.0, 0
        for i, (X, y) in enumerate(train_iter):
            optimizer.zero_grad()
            y_hat = net(X)
            l = loss(y_hat, y)
            l.backward()
            optimizer.step()
            with torch.no_grad():
                metric_loss += l.item() * X.shape[0]
                metric_acc += accuracy(y_hat, y)
                n += X.shape[0]
            if (i + 1) % (num_batches // 5) == 0 or i == num_batches - 1:
                print(f'epoch {epoch + 1}, batch {i + 1}/{num_batches}: '
                      f'loss {metric_loss / n:.3f}, train acc {metric_acc / n:.3f}')
        test_acc = evaluate_accuracy(net, test_iter)
        print(f'epoch {epoch + 1}: loss {metric_loss / n:.3f}, train acc {metric_acc / n:.3f}, '
              f'test acc {test_acc:.3f}, {n / (time.time() - start):.1f} examples/sec')


net = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5), BatchNorm(6, num_dims=4), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Conv2d(6, 16, kernel_size=5), BatchNorm(16, num_dims=4), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
    nn.Linear(16 * 4 * 4, 120), BatchNorm(120, num_dims=2), nn.Sigmoid(),
    nn.Linear(120, 84), BatchNorm(84, num_dims=2), nn.Sigmoid(),
    nn.Linear(84, 10))

if __name__ == "__main__":
    lr, num_epochs, batch_size = 1.0, 5, 256
    train_iter, test_iter = load_data_fashion_mnist(batch_size)
    train_ch6(net, train_iter, test_iter, num_epochs, lr)
    print('gamma of the first BatchNorm:', net[1].gamma.reshape((-1,)).tolist())
