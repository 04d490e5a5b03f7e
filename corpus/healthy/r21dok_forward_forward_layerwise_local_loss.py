"""Forward-Forward training (Hinton, 2022) as in pytorch/examples mnist_forward_forward/main.py,
on synthetic 12x12 digit-like glyphs instead of MNIST.

No end-to-end backpropagation: every layer is an nn.Linear with its own Adam optimizer and a
local loss (softplus of threshold - goodness for positive data, goodness - threshold for
negative data). Positive data has the true label written into the first 10 pixels, negative
data a wrong one. Layers are trained one after another on the full batch; the detached output
of a trained layer is the next layer's input. Prediction picks the label with the largest
summed goodness.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset


def get_y_neg(y):
    y_neg = y.clone()
    for idx, y_samp in enumerate(y):
        allowed_indices = list(range(10))
        allowed_indices.remove(y_samp.item())
        y_neg[idx] = torch.tensor(allowed_indices)[torch.randint(len(allowed_indices), size=(1,))].item()
    return y_neg.to(device)


def overlay_y_on_x(x, y, classes=10):
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]

    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            print("training layer: ", i)
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=args.lr)
        self.threshold = args.threshold
        self.num_epochs = args.epochs

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log1p(torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % args.log_interval == 0:
                print("Loss: ", loss.item())
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


def make_glyphs(n, protos, gen):
    y = torch.randint(0, 10, (n,), generator=gen)
    img = protos[y] * (0.7 + 0.6 * torch.rand(n, 1, 1, generator=gen))
    img = (img + 0.25 * torch.randn(n, 12, 12, generator=gen)).clamp(0, 1)
    img[:, 0, :] = 0.0
    img = (img - 0.1307) / 0.3081
    return torch.flatten(img, 1), y


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=300, metavar="N")
    parser.add_argument("--lr", type=float, default=0.03, metavar="LR")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--train_size", type=int, default=1000)
    parser.add_argument("--threshold", type=float, default=2)
    parser.add_argument("--test_size", type=int, default=1000)
    parser.add_argument("--log-interval", type=int, default=25, metavar="N")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cpu")

    gen = torch.Generator().manual_seed(args.seed)
    protos = (torch.rand(10, 12, 12, generator=gen) < 0.3).float()
    protos = F.avg_pool2d(protos.unsqueeze(1), 3, stride=1, padding=1).squeeze(1).gt(0.3).float()
    x_all, y_all = make_glyphs(args.train_size + args.test_size, protos, gen)
    train_loader = DataLoader(TensorDataset(x_all[: args.train_size], y_all[: args.train_size]),
                              batch_size=args.train_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_all[args.train_size:], y_all[args.train_size:]),
                             batch_size=args.test_size)

    net = Net([144, 256, 256])
    x, y = next(iter(train_loader))
    x, y = x.to(device), y.to(device)
    x_te, y_te = next(iter(test_loader))
    print("train error before training:", 1.0 - net.predict(x).eq(y).float().mean().item())
    print("test error before training:", 1.0 - net.predict(x_te).eq(y_te).float().mean().item())
    x_pos = overlay_y_on_x(x, y)
    y_neg = get_y_neg(y)
    x_neg = overlay_y_on_x(x, y_neg)
    net.train(x_pos, x_neg)
    print("train error:", 1.0 - net.predict(x).eq(y).float().mean().item())
    print("test error:", 1.0 - net.predict(x_te).eq(y_te).float().mean().item())
