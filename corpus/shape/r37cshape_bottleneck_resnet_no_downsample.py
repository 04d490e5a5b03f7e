"""Small bottleneck ResNet for 3-keypoint heatmap regression (CPN-style global net
backbone) on synthetic 64x64 images with one Gaussian blob per keypoint."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_KEYPOINTS = 3


def make_data(n):
    imgs = torch.randn(n, 3, 64, 64) * 0.1
    heatmaps = torch.zeros(n, NUM_KEYPOINTS, 16, 16)
    ys, xs = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    for i in range(n):
        pts = torch.randint(2, 14, (NUM_KEYPOINTS, 2)).float()
        for k in range(NUM_KEYPOINTS):
            cy, cx = pts[k]
            heatmaps[i, k] = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 8.0)
            imgs[i, k, int(cy) * 4:int(cy) * 4 + 4, int(cx) * 4:int(cx) * 4 + 4] += 1.0
    return imgs, heatmaps


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(Bottleneck, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)

        out = self.conv3(out)
        out = self.bn3(out)

        if self.downsample is not None:
            residual = self.downsample(x)

        out += residual
        out = self.relu(out)
        return out


class PoseResNet(nn.Module):
    def __init__(self, block, layers, num_keypoints=NUM_KEYPOINTS):
        super(PoseResNet, self).__init__()
        self.inplanes = 32
        self.conv1 = nn.Conv2d(3, 32, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 16, layers[0])
        self.layer2 = self._make_layer(block, 32, layers[1], stride=1)
        self.head = nn.Conv2d(32 * block.expansion, num_keypoints, kernel_size=1)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        return self.head(x)


imgs, heatmaps = make_data(256)
loader = DataLoader(TensorDataset(imgs, heatmaps), batch_size=32, shuffle=True)
model = PoseResNet(Bottleneck, [2, 2])
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.MSELoss()

for epoch in range(6):
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: heatmap loss {total / len(loader):.5f}")
