"""Spatial transformer network as in the PyTorch tutorial (intermediate/spatial_transformer_tutorial.py):
a localisation net regresses a 2x3 affine theta, F.affine_grid + F.grid_sample warp the input, then a
small LeNet classifies it. MNIST is replaced by synthetic 28x28 glyphs of 4 kinds that are randomly
shifted, rotated and scaled, so the STN has something to undo."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(1)
device = torch.device("cpu")


def make_glyph(kind):
    img = torch.zeros(28, 28)
    if kind == 0:
        img[8:20, 8] = 1; img[8:20, 19] = 1; img[8, 8:20] = 1; img[19, 8:20] = 1
    elif kind == 1:
        img[6:22, 13:15] = 1; img[13:15, 6:22] = 1
    elif kind == 2:
        for i in range(7, 21):
            img[i, i] = 1; img[i, 27 - i] = 1
    else:
        img[9:11, 6:22] = 1; img[17:19, 6:22] = 1; img[9:19, 6:8] = 1
    return img


class DistortedGlyphs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        base = torch.stack([make_glyph(int(k)) for k in self.labels]).unsqueeze(1)
        ang = (torch.rand(n, generator=g) - 0.5) * math.pi / 2
        scale = 0.8 + 0.5 * torch.rand(n, generator=g)
        shift = (torch.rand(n, 2, generator=g) - 0.5) * 0.6
        theta = torch.zeros(n, 2, 3)
        theta[:, 0, 0] = scale * torch.cos(ang); theta[:, 0, 1] = -scale * torch.sin(ang)
        theta[:, 1, 0] = scale * torch.sin(ang); theta[:, 1, 1] = scale * torch.cos(ang)
        theta[:, :, 2] = shift
        grid = F.affine_grid(theta, base.size(), align_corners=False)
        imgs = F.grid_sample(base, grid, align_corners=False)
        imgs = imgs + 0.1 * torch.randn(imgs.shape, generator=g)
        self.images = (imgs - 0.1307) / 0.3081

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


train_loader = DataLoader(DistortedGlyphs(2048, 0), batch_size=64, shuffle=True)
test_loader = DataLoader(DistortedGlyphs(512, 1), batch_size=256)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 4)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        return x, theta

    def forward(self, x):
        # transform the input
        x, theta = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


model = Net().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
identity = torch.tensor([[1., 0., 0.], [0., 1., 0.]])


def train(epoch):
    model.train()
    total, n = 0.0, 0
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(data)
        n += len(data)
    print('Train Epoch: {} \tLoss: {:.4f}\tfc_loc[2].weight norm: {:.4f}'.format(
        epoch, total / n, model.fc_loc[2].weight.norm().item()))


def test():
    with torch.no_grad():
        model.eval()
        test_loss, correct, dev = 0, 0, 0.0
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
            _, theta = model.stn(data)
            dev += (theta - identity).abs().mean(dim=(1, 2)).sum().item()
        n = len(test_loader.dataset)
        print('Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%), mean |theta - I|: {:.3f}'.format(
            test_loss / n, correct, n, 100. * correct / n, dev / n))


test()
for epoch in range(1, 7):
    train(epoch)
    test()
