"""Real-time hair segmentation (MobileNet encoder / light decoder), trained on portraits.

Synthetic portraits: a skin-coloured face ellipse on a textured background with a dark,
striped hair region on top; the target is the per-pixel hair mask (2 classes).
"""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

parser = argparse.ArgumentParser()
parser.add_argument('--image_size', type=int, default=96, help='the height / width of the input image to network')
parser.add_argument('--num_classes', type=int, default=2, help='number of model output channels')
parser.add_argument('--batch_size', type=int, default=32, help='batch size')
parser.add_argument('--num_epoch', type=int, default=1, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=1, help='learning rate')
parser.add_argument('--rho', type=float, default=0.95, help='adadelta rho')
parser.add_argument('--eps', type=float, default=1e-7, help='adadelta eps')
parser.add_argument('--decay', type=float, default=2e-5, help='adadelta decay')
parser.add_argument('--num_images', type=int, default=96, help='number of training portraits')


class HairDataset(Dataset):
    def __init__(self, n, size):
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing='ij')
        xx, yy = xx.expand(n, 1, size, size), yy.expand(n, 1, size, size)
        cx, cy = (0.3 * (torch.rand(2, n, 1, 1, 1) - 0.5)).unbind(0)
        rx, ry = (0.35 + 0.15 * torch.rand(2, n, 1, 1, 1)).unbind(0)
        face = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
        head = ((xx - cx) / (rx + 0.15)) ** 2 + ((yy - cy + 0.1) / (ry + 0.2)) ** 2 < 1
        hair = head & ~face & (yy < cy + 0.2 * torch.rand(n, 1, 1, 1))
        img = 0.5 + 0.2 * torch.randn(n, 3, 1, 1) + 0.15 * torch.randn(n, 3, size, size)
        skin = torch.tensor([0.85, 0.65, 0.55]).view(1, 3, 1, 1)
        img = torch.where(face, skin + 0.05 * torch.randn(n, 3, size, size), img)
        stripes = 0.08 * torch.sin(40 * xx + 10 * torch.rand(n, 1, 1, 1))
        hair_col = torch.tensor([0.25, 0.15, 0.1]).view(1, 3, 1, 1) * (0.6 + 0.8 * torch.rand(n, 1, 1, 1))
        img = torch.where(hair, hair_col + stripes, img)
        self.images = img.clamp(0, 1)
        self.masks = hair[:, 0].long()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


class _Layer_Depwise_Encode(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, reserve=False):
        super().__init__()
        self.stride = 1 if reserve else int(out_channels / in_channels)
        self.layer = nn.Sequential(
            nn.Conv2d(in_channels, in_channels, kernel_size=kernel_size, stride=1, padding=1, groups=in_channels),
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=self.stride),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.layer(x)


class _Layer_Depwise_Decode(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size=3, stride=1):
        super().__init__()
        self.layer = nn.Sequential(
            nn.Conv2d(in_channel, in_channel, kernel_size=kernel_size, stride=stride, padding=1, groups=in_channel),
            nn.Conv2d(in_channel, out_channel, kernel_size=1, stride=stride),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.layer(x)


class MobileHairNet(nn.Module):
    def __init__(self, num_classes=2, kernel_size=3):
        super().__init__()
        self.encode_layer1 = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=kernel_size, stride=2, padding=1),
            _Layer_Depwise_Encode(32, 64, reserve=True),
        )
        self.encode_layer2 = nn.Sequential(_Layer_Depwise_Encode(64, 128), _Layer_Depwise_Encode(128, 128))
        self.encode_layer3 = nn.Sequential(_Layer_Depwise_Encode(128, 256), _Layer_Depwise_Encode(256, 256))
        self.encode_layer4 = nn.Sequential(_Layer_Depwise_Encode(256, 512), _Layer_Depwise_Encode(512, 512))
        self.encode_layer5 = nn.Sequential(_Layer_Depwise_Encode(512, 1024), _Layer_Depwise_Encode(1024, 1024))

        self.decode_layer1 = nn.Upsample(scale_factor=2)
        self.decode_layer2 = nn.Sequential(
            nn.Conv2d(1024, 64, kernel_size=1),
            _Layer_Depwise_Decode(64, 64, kernel_size=kernel_size),
            nn.Upsample(scale_factor=2),
        )
        self.decode_layer3 = nn.Sequential(_Layer_Depwise_Decode(64, 64, kernel_size=kernel_size), nn.Upsample(scale_factor=2))
        self.decode_layer4 = nn.Sequential(_Layer_Depwise_Decode(64, 64, kernel_size=kernel_size), nn.Upsample(scale_factor=2))
        self.decode_layer5 = nn.Sequential(
            _Layer_Depwise_Decode(64, 64, kernel_size=kernel_size),
            nn.Upsample(scale_factor=2),
            _Layer_Depwise_Decode(64, 64, kernel_size=kernel_size),
            nn.Conv2d(64, num_classes, kernel_size=kernel_size, padding=1),
        )
        self.encode_to_decoder4 = nn.Conv2d(512, 1024, kernel_size=1)
        self.encode_to_decoder3 = nn.Conv2d(256, 64, kernel_size=1)
        self.encode_to_decoder2 = nn.Conv2d(128, 64, kernel_size=1)
        self.encode_to_decoder1 = nn.Conv2d(64, 64, kernel_size=1)

    def forward(self, x):
        encode_layer1 = self.encode_layer1(x)
        encode_layer2 = self.encode_layer2(encode_layer1)
        encode_layer3 = self.encode_layer3(encode_layer2)
        encode_layer4 = self.encode_layer4(encode_layer3)
        encode_layer5 = self.encode_layer5(encode_layer4)

        encode_layer4 = self.encode_to_decoder4(encode_layer4)
        encode_layer3 = self.encode_to_decoder3(encode_layer3)
        encode_layer2 = self.encode_to_decoder2(encode_layer2)
        encode_layer1 = self.encode_to_decoder1(encode_layer1)

        decode_layer1 = self.decode_layer1(encode_layer5) + encode_layer4
        decode_layer2 = self.decode_layer2(decode_layer1) + encode_layer3
        decode_layer3 = self.decode_layer3(decode_layer2) + encode_layer2
        decode_layer4 = self.decode_layer4(decode_layer3) + encode_layer1
        decode_layer5 = self.decode_layer5(decode_layer4)
        return decode_layer5


class Trainer:
    def __init__(self, config, data_loader):
        self.config = config
        self.data_loader = data_loader
        self.net = MobileHairNet(num_classes=config.num_classes)
        self.optimizer = torch.optim.Adadelta(self.net.parameters(), lr=config.lr, rho=config.rho,
                                              eps=config.eps, weight_decay=config.decay)
        self.criterion = nn.CrossEntropyLoss()

    def train(self):
        self.net.train()
        for epoch in range(self.config.num_epoch):
            for step, (image, mask) in enumerate(self.data_loader):
                pred = self.net(image)
                loss = self.criterion(pred, mask)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                iou = self.iou(pred.detach(), mask)
                print(f"[{epoch}/{self.config.num_epoch}][{step}/{len(self.data_loader)}] "
                      f"loss: {loss.item():.4f} IOU: {iou:.4f}")

    @staticmethod
    def iou(pred, mask):
        hair = pred.argmax(1) == 1
        target = mask == 1
        inter = (hair & target).sum().item()
        union = (hair | target).sum().item()
        return inter / max(union, 1)


def main(config):
    dataset = HairDataset(config.num_images, config.image_size)
    data_loader = DataLoader(dataset, batch_size=config.batch_size, shuffle=True, drop_last=True)
    trainer = Trainer(config, data_loader)
    trainer.train()


if __name__ == '__main__':
    main(parser.parse_args())
