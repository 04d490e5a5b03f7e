"""Shake-Shake regularised ResNet (Gastaldi 2017) on synthetic 16x16 texture images, written after
hysts/pytorch_shake_shake: each residual block has two branches mixed by a custom autograd
Function, with a random alpha per image in the forward pass and an independent random beta per
image in the backward pass (shake_forward, shake_backward, shake_image = True); at test time both
branches are averaged (alpha = 0.5). SGD with Nesterov momentum, cosine annealing, weight decay."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class ShakeFunction(Function):
    @staticmethod
    def forward(ctx, x1, x2, alpha, beta):
        ctx.save_for_backward(x1, x2, alpha, beta)
        y = x1 * alpha + x2 * (1 - alpha)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x1, x2, alpha, beta = ctx.saved_tensors
        grad_x1 = grad_x2 = grad_alpha = grad_beta = None
        if ctx.needs_input_grad[0]:
            grad_x1 = grad_output * beta
        if ctx.needs_input_grad[1]:
            grad_x2 = grad_output * (1 - beta)
        return grad_x1, grad_x2, grad_alpha, grad_beta


shake_function = ShakeFunction.apply


def get_alpha_beta(batch_size, shake_config, device):
    forward_shake, backward_shake, shake_image = shake_config
    if forward_shake and not shake_image:
        alpha = torch.rand(1)
    elif forward_shake and shake_image:
        alpha = torch.rand(batch_size).view(batch_size, 1, 1, 1)
    else:
        alpha = torch.FloatTensor([0.5])
    if backward_shake and not shake_image:
        beta = torch.rand(1)
    elif backward_shake and shake_image:
        beta = torch.rand(batch_size).view(batch_size, 1, 1, 1)
    else:
        beta = torch.FloatTensor([0.5])
    return alpha.to(device), beta.to(device)


class ResidualPath(nn.Module):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        x = F.relu(x, inplace=False)
        x = F.relu(self.bn1(self.conv1(x)), inplace=False)
        return self.bn2(self.conv2(x))


class DownsamplingShortcut(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, in_channels, 1, stride=1, padding=0, bias=False)
        self.conv2 = nn.Conv2d(in_channels, in_channels, 1, stride=1, padding=0, bias=False)
        self.bn = nn.BatchNorm2d(in_channels * 2)

    def forward(self, x):
        x = F.relu(x, inplace=False)
        y1 = F.avg_pool2d(x, kernel_size=1, stride=2, padding=0)
        y1 = self.conv1(y1)
        y2 = F.pad(x[:, :, 1:, 1:], (0, 1, 0, 1))
        y2 = F.avg_pool2d(y2, kernel_size=1, stride=2, padding=0)
        y2 = self.conv2(y2)
        return self.bn(torch.cat([y1, y2], dim=1))


class BasicBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride, shake_config):
        super().__init__()
        self.shake_config = shake_config
        self.residual_path1 = ResidualPath(in_channels, out_channels, stride)
        self.residual_path2 = ResidualPath(in_channels, out_channels, stride)
        self.shortcut = nn.Sequential()
        if in_channels != out_channels:
            self.shortcut.add_module('downsample', DownsamplingShortcut(in_channels))

    def forward(self, x):
        x1 = self.residual_path1(x)
        x2 = self.residual_path2(x)
        if self.training:
            shake_config = self.shake_config
        else:
            shake_config = (False, False, False)
        alpha, beta = get_alpha_beta(x.size(0), shake_config, x.device)
        y = shake_function(x1, x2, alpha, beta)
        return self.shortcut(x) + y


class Network(nn.Module):
    def __init__(self, n_classes=4, base_channels=8, depth=8, shake_config=(True, True, True)):
        super().__init__()
        n_blocks = (depth - 2) // 6
        n_channels = [base_channels, base_channels * 2, base_channels * 4]
        self.conv = nn.Conv2d(3, n_channels[0], 3, stride=1, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(base_channels)
        self.stage1 = self._make_stage(n_channels[0], n_channels[0], n_blocks, 1, shake_config)
        self.stage2 = self._make_stage(n_channels[0], n_channels[1], n_blocks, 2, shake_config)
        self.stage3 = self._make_stage(n_channels[1], n_channels[2], n_blocks, 2, shake_config)
        self.fc = nn.Linear(n_channels[2], n_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight.data, mode='fan_out')
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def _make_stage(self, in_channels, out_channels, n_blocks, stride, shake_config):
        stage = nn.Sequential()
        for index in range(n_blocks):
            stage.add_module(f'block{index + 1}', BasicBlock(
                in_channels if index == 0 else out_channels, out_channels,
                stride if index == 0 else 1, shake_config))
        return stage

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)), inplace=True)
        x = self.stage3(self.stage2(self.stage1(x)))
        x = F.adaptive_avg_pool2d(x, output_size=1)
        return self.fc(x.view(x.size(0), -1))


class TextureDataset(Dataset):
    """4 classes of noisy oriented stripes (0, 45, 90, 135 degrees) with random phase and colour."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing='ij')
        angles = self.labels.float() * math.pi / 4
        freq = 0.6 + 0.4 * torch.rand(n, generator=g)
        phase = 2 * math.pi * torch.rand(n, generator=g)
        proj = xx[None] * torch.cos(angles)[:, None, None] + yy[None] * torch.sin(angles)[:, None, None]
        stripes = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
        colour = 0.5 + torch.rand(n, 3, 1, 1, generator=g)
        self.images = colour * stripes[:, None] + 2.5 * torch.randn(n, 3, 16, 16, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


train_loader = DataLoader(TextureDataset(1024, 1), batch_size=64, shuffle=True, drop_last=True)
test_loader = DataLoader(TextureDataset(256, 2), batch_size=256, shuffle=False)

epochs = 5
model = Network()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, nesterov=True)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * len(train_loader), eta_min=0)


def test():
    model.eval()
    correct, loss_meter = 0, 0.0
    with torch.no_grad():
        for data, targets in test_loader:
            outputs = model(data)
            loss_meter += criterion(outputs, targets).item() * data.size(0)
            correct += (outputs.argmax(1) == targets).sum().item()
    n = len(test_loader.dataset)
    return loss_meter / n, correct / n


loss, acc = test()
print(f'Epoch 0 | test loss {loss:.4f} | test acc {acc:.4f}')
for epoch in range(1, epochs + 1):
    model.train()
    loss_meter, correct, count = 0.0, 0, 0
    for step, (data, targets) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = model(data)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_meter += loss.item() * data.size(0)
        correct += (outputs.argmax(1) == targets).sum().item()
        count += data.size(0)
    test_loss, test_acc = test()
    print(f'Epoch {epoch} | lr {scheduler.get_last_lr()[0]:.4f} | train loss {loss_meter / count:.4f} | '
          f'train acc {correct / count:.4f} | test loss {test_loss:.4f} | test acc {test_acc:.4f}')
