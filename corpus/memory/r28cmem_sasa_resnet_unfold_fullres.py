"""Stand-alone self-attention ResNet (SASA) on 64x64 texture images.

Every spatial 3x3 convolution in the bottleneck blocks is replaced by local
self-attention over a 7x7 neighbourhood (AttentionConv, keys and values gathered
with unfold). Trained on a synthetic 6-class texture set; validation accuracy per epoch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 6
IMG_SIZE = 64


class AttentionConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, groups=1, bias=False):
        super(AttentionConv, self).__init__()
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.groups = groups

        self.rel_h = nn.Parameter(torch.randn(out_channels // 2, 1, 1, kernel_size, 1))
        self.rel_w = nn.Parameter(torch.randn(out_channels // 2, 1, 1, 1, kernel_size))

        self.key_conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)
        self.query_conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)
        self.value_conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x):
        batch, channels, height, width = x.size()

        padded_x = F.pad(x, [self.padding, self.padding, self.padding, self.padding])
        q_out = self.query_conv(x)
        k_out = self.key_conv(padded_x)
        v_out = self.value_conv(padded_x)

        k_out = k_out.unfold(2, self.kernel_size, self.stride).unfold(3, self.kernel_size, self.stride)
        v_out = v_out.unfold(2, self.kernel_size, self.stride).unfold(3, self.kernel_size, self.stride)

        v_out_h, v_out_w = v_out.split(self.out_channels // 2, dim=1)
        v_out = torch.cat((v_out_h + self.rel_h, v_out_w + self.rel_w), dim=1)

        k_out = k_out.contiguous().view(batch, self.groups, self.out_channels // self.groups, height, width, -1)
        v_out = v_out.contiguous().view(batch, self.groups, self.out_channels // self.groups, height, width, -1)

        q_out = q_out.view(batch, self.groups, self.out_channels // self.groups, height, width, 1)

        out = q_out * k_out
        out = F.softmax(out, dim=-1)
        out = torch.einsum('bnchwk,bnchwk -> bnchw', out, v_out).view(batch, -1, height, width)

        return out


class Bottleneck(nn.Module):
    expansion = 2

    def __init__(self, in_channels, width, stride=1, groups=4):
        super(Bottleneck, self).__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.conv2 = nn.Sequential(
            AttentionConv(width, width, kernel_size=7, padding=3, groups=groups),
            nn.BatchNorm2d(width), nn.ReLU(),
        )
        self.conv3 = nn.Sequential(nn.Conv2d(width, width * self.expansion, 1, bias=False),
                                   nn.BatchNorm2d(width * self.expansion))
        self.pool = nn.AvgPool2d(2, 2) if stride == 2 else nn.Identity()
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != width * self.expansion:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, width * self.expansion, 1, bias=False),
                                          nn.BatchNorm2d(width * self.expansion))

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(out)
        out = self.conv3(out)
        out = out + self.shortcut(x)
        return self.pool(F.relu(out))


class SASAResNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super(SASAResNet, self).__init__()
        self.init = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.layer1 = Bottleneck(32, 16, stride=2)
        self.layer2 = Bottleneck(32, 16, stride=2)
        self.dense = nn.Linear(32, num_classes)

    def forward(self, x):
        out = self.init(x)
        out = self.layer1(out)
        out = self.layer2(out)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.dense(out)


def make_textures(n, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(IMG_SIZE).float(), torch.arange(IMG_SIZE).float(), indexing="ij")
    angles = torch.tensor([0.0, 0.5, 1.0, 1.6, 2.2, 2.7])
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    phase = torch.rand(n, generator=g) * 6.28
    theta = angles[y][:, None, None]
    wave = torch.sin(0.6 * (xx * torch.cos(theta) + yy * torch.sin(theta)) + phase[:, None, None])
    x = wave[:, None].repeat(1, 3, 1, 1) + 0.8 * torch.randn(n, 3, IMG_SIZE, IMG_SIZE, generator=g)
    return TensorDataset(x, y)


train_loader = DataLoader(make_textures(320, 1), batch_size=16, shuffle=True)
val_loader = DataLoader(make_textures(128, 2), batch_size=32)

model = SASAResNet()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(1, 3):
    model.train()
    running = 0.0
    for step, (images, labels) in enumerate(train_loader, 1):
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 8 == 0:
            print(f"epoch {epoch} step {step}: loss {running / 8:.4f}")
            running = 0.0
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in val_loader:
            correct += (model(images).argmax(1) == labels).sum().item()
    print(f"epoch {epoch}: val acc {correct / len(val_loader.dataset):.3f}")
