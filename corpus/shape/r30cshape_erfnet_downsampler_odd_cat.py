"""Road-scene segmentation with a small ERFNet (factorised residual blocks, downsampler
blocks that concatenate a strided conv with a max-pool) on a custom camera dataset.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_CLASSES = 4
IMG_H, IMG_W = 60, 80


class CameraDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, 3, IMG_H, IMG_W, generator=g)
        rows = torch.arange(IMG_H)[:, None].expand(IMG_H, IMG_W)
        cols = torch.arange(IMG_W)[None, :].expand(IMG_H, IMG_W)
        horizon = torch.randint(IMG_H // 4, IMG_H // 2, (n,), generator=g)
        self.labels = torch.zeros(n, IMG_H, IMG_W, dtype=torch.long)
        for i in range(n):
            lab = (rows > horizon[i]).long()
            lab[(rows > horizon[i]) & ((cols - IMG_W // 2).abs() < (rows - horizon[i]))] = 2
            lab[rows <= horizon[i] // 2] = 3
            self.labels[i] = lab
            self.images[i, lab[None].expand(3, -1, -1) == 2] += 0.5
            self.images[i, 2][lab == 3] += 0.7

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class DownsamplerBlock(nn.Module):
    def __init__(self, ninput, noutput):
        super().__init__()
        self.conv = nn.Conv2d(ninput, noutput - ninput, (3, 3), stride=2, padding=1, bias=True)
        self.pool = nn.MaxPool2d(2, stride=2)
        self.bn = nn.BatchNorm2d(noutput, eps=1e-3)

    def forward(self, input):
        output = torch.cat([self.conv(input), self.pool(input)], 1)
        output = self.bn(output)
        return F.relu(output)


class non_bottleneck_1d(nn.Module):
    def __init__(self, chann, dilated):
        super().__init__()
        self.conv3x1_1 = nn.Conv2d(chann, chann, (3, 1), stride=1, padding=(1, 0), bias=True)
        self.conv1x3_1 = nn.Conv2d(chann, chann, (1, 3), stride=1, padding=(0, 1), bias=True)
        self.bn1 = nn.BatchNorm2d(chann, eps=1e-03)
        self.conv3x1_2 = nn.Conv2d(chann, chann, (3, 1), stride=1, padding=(dilated, 0), bias=True, dilation=(dilated, 1))
        self.conv1x3_2 = nn.Conv2d(chann, chann, (1, 3), stride=1, padding=(0, dilated), bias=True, dilation=(1, dilated))
        self.bn2 = nn.BatchNorm2d(chann, eps=1e-03)

    def forward(self, input):
        output = F.relu(self.conv3x1_1(input))
        output = F.relu(self.bn1(self.conv1x3_1(output)))
        output = F.relu(self.conv3x1_2(output))
        output = self.bn2(self.conv1x3_2(output))
        return F.relu(output + input)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.initial_block = DownsamplerBlock(3, 16)
        self.layers = nn.ModuleList()
        self.layers.append(DownsamplerBlock(16, 32))
        self.layers.append(non_bottleneck_1d(32, 1))
        self.layers.append(DownsamplerBlock(32, 64))
        for d in (2, 4):
            self.layers.append(non_bottleneck_1d(64, d))

    def forward(self, input):
        output = self.initial_block(input)
        for layer in self.layers:
            output = layer(output)
        return output


class Decoder(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(64, 32, 3, stride=2, padding=1, output_padding=1, bias=True)
        self.up2 = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1, bias=True)
        self.output_conv = nn.ConvTranspose2d(16, num_classes, 2, stride=2, padding=0, bias=True)

    def forward(self, input):
        output = F.relu(self.up1(input))
        output = F.relu(self.up2(output))
        return self.output_conv(output)


class ERFNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder(num_classes)

    def forward(self, input):
        return self.decoder(self.encoder(input))


train_loader = DataLoader(CameraDataset(256, 1), batch_size=16, shuffle=True)
val_loader = DataLoader(CameraDataset(64, 2), batch_size=32)

model = ERFNet(N_CLASSES)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-4)

for epoch in range(5):
    model.train()
    epoch_loss = []
    for step, (images, labels) in enumerate(train_loader):
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss.append(loss.item())
        if step % 8 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    model.eval()
    inter = torch.zeros(N_CLASSES)
    union = torch.zeros(N_CLASSES)
    with torch.no_grad():
        for images, labels in val_loader:
            pred = model(images).argmax(1)
            for c in range(N_CLASSES):
                inter[c] += ((pred == c) & (labels == c)).sum()
                union[c] += ((pred == c) | (labels == c)).sum()
    print(f"epoch {epoch} train loss {sum(epoch_loss) / len(epoch_loss):.4f} val mIoU {(inter / union.clamp(min=1)).mean():.3f}", flush=True)
