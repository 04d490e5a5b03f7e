"""3D segmentation of a bright blob in small CT-like volumes with a tiny UNETR-style
conv encoder/decoder, Dice + CE loss, AdamW, train_epoch / val_epoch like the tutorial."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = torch.device("cpu")
max_epochs = 10
batch_size = 4
roi = 12


class BlobVolumes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        zz, yy, xx = torch.meshgrid(torch.arange(roi), torch.arange(roi), torch.arange(roi), indexing="ij")
        self.items = []
        for _ in range(n):
            c = torch.randint(4, roi - 3, (3,), generator=g).float()
            r = 2.5 + 2.0 * torch.rand(1, generator=g).item()
            d = ((zz - c[0]) ** 2 + (yy - c[1]) ** 2 + (xx - c[2]) ** 2).sqrt()
            label = (d < r).long()
            image = 0.8 * label.float() + 0.5 * torch.randn(roi, roi, roi, generator=g)
            self.items.append({"image": image.unsqueeze(0), "label": label.unsqueeze(0)})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv3d(cin, cout, 3, padding=1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01),
            nn.Conv3d(cout, cout, 3, padding=1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01),
        )

    def forward(self, x):
        return self.conv(x)


class TinyUNETR(nn.Module):
    def __init__(self, in_channels=1, out_channels=2, feature_size=4):
        super().__init__()
        f = feature_size
        self.encoder1 = ConvBlock(in_channels, f)
        self.encoder2 = ConvBlock(f, 2 * f)
        self.bottleneck = ConvBlock(2 * f, 4 * f)
        self.up2 = nn.ConvTranspose3d(4 * f, 2 * f, 2, stride=2)
        self.decoder2 = ConvBlock(4 * f, 2 * f)
        self.up1 = nn.ConvTranspose3d(2 * f, f, 2, stride=2)
        self.decoder1 = ConvBlock(2 * f, f)
        self.out = nn.Conv3d(f, out_channels, 1)

    def forward(self, x):
        e1 = self.encoder1(x)
        e2 = self.encoder2(F.max_pool3d(e1, 2))
        b = self.bottleneck(F.max_pool3d(e2, 2))
        d2 = self.decoder2(torch.cat([self.up2(b), e2], 1))
        d1 = self.decoder1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)


class DiceCELoss(nn.Module):
    def forward(self, logits, target):
        ce = F.cross_entropy(logits, target[:, 0])
        probs = logits.softmax(1)
        onehot = F.one_hot(target[:, 0], logits.shape[1]).permute(0, 4, 1, 2, 3).float()
        dims = (2, 3, 4)
        inter = (probs * onehot).sum(dims)
        denom = probs.sum(dims) + onehot.sum(dims)
        dice = 1.0 - (2.0 * inter + 1e-5) / (denom + 1e-5)
        return ce + dice.mean()


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train_epoch(model, loader, optimizer, epoch, loss_func):
    model.train()
    start_time = time.time()
    run_loss = AverageMeter()
    for idx, batch_data in enumerate(loader):
        data, target = batch_data["image"].to(device), batch_data["label"].to(device)
        logits = model(data)
        loss = loss_func(logits, target)
        loss.backward()
        optimizer.step()
        run_loss.update(loss.item(), n=batch_size)
        if idx % 10 == 0:
            print("Epoch {}/{} {}/{}".format(epoch, max_epochs, idx, len(loader)),
                  "loss: {:.4f}".format(run_loss.avg), "time {:.2f}s".format(time.time() - start_time))
    return run_loss.avg


@torch.no_grad()
def val_epoch(model, loader):
    model.eval()
    dices = []
    for batch_data in loader:
        data, target = batch_data["image"], batch_data["label"]
        pred = model(data).argmax(1)
        t = target[:, 0]
        inter = ((pred == 1) & (t == 1)).sum((1, 2, 3)).float()
        dice = 2 * inter / ((pred == 1).sum((1, 2, 3)) + (t == 1).sum((1, 2, 3))).float().clamp(min=1)
        dices.append(dice)
    return torch.cat(dices).mean().item()


train_loader = DataLoader(BlobVolumes(64, 1), batch_size=batch_size, shuffle=True)
val_loader = DataLoader(BlobVolumes(16, 2), batch_size=batch_size)
model = TinyUNETR().to(device)
loss_func = DiceCELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=1e-5)

for epoch in range(max_epochs):
    train_loss = train_epoch(model, train_loader, optimizer, epoch, loss_func)
    val_dice = val_epoch(model, val_loader)
    print("Final training  {}/{}".format(epoch, max_epochs - 1), "loss: {:.4f}".format(train_loss),
          "val dice: {:.4f}".format(val_dice))
