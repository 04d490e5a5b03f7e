"""DeepLabv3+-style semantic segmentation on VOC-like scenes.

A small atrous-conv encoder with an ASPP head and a decoder that fuses low-level features,
trained with per-pixel cross-entropy (border pixels labelled 255 are ignored), SGD with
momentum and a poly learning-rate policy. Scenes are synthetic: coloured discs, squares and
bars on textured backgrounds, 4 classes including background.
"""
import timeit
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1)
np.random.seed(1)

# Setting parameters
nEpochs = 2  # Number of epochs for training
resume_epoch = 0

p = OrderedDict()  # Parameters to include in report
p['trainBatch'] = 6  # Training batch size
testBatch = 6  # Testing batch size
nTestInterval = 1  # Run on test set every nTestInterval epochs
p['nAveGrad'] = 1  # Average the gradient of several iterations
p['lr'] = 1e-7  # Learning rate
p['wd'] = 5e-4  # Weight decay
p['momentum'] = 0.9  # Momentum
p['epoch_size'] = 10  # How many epochs to change learning rate
n_classes = 4


class ShapesSegmentation(Dataset):
    def __init__(self, n, size=48, seed=0):
        rng = np.random.RandomState(seed)
        self.images = np.zeros((n, 3, size, size), dtype=np.float32)
        self.labels = np.zeros((n, size, size), dtype=np.int64)
        yy, xx = np.mgrid[0:size, 0:size]
        for i in range(n):
            img = 0.4 + 0.2 * rng.rand(3, 1, 1) + 0.1 * rng.randn(3, size, size)
            lab = np.zeros((size, size), dtype=np.int64)
            for _ in range(rng.randint(1, 4)):
                cls = rng.randint(1, n_classes)
                cx, cy, r = rng.randint(8, size - 8), rng.randint(8, size - 8), rng.randint(4, 9)
                if cls == 1:
                    m = (xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2
                elif cls == 2:
                    m = (abs(xx - cx) < r) & (abs(yy - cy) < r)
                else:
                    m = (abs(xx - cx) < r) & (abs(yy - cy) < 3)
                color = np.array([[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.2, 0.3, 0.9]])[cls - 1]
                img[:, m] = color[:, None] + 0.05 * rng.randn(3, m.sum())
                lab[m] = cls
            # object boundaries are 'void' in VOC
            edge = np.zeros_like(lab, dtype=bool)
            edge[1:, :] |= lab[1:, :] != lab[:-1, :]
            edge[:, 1:] |= lab[:, 1:] != lab[:, :-1]
            lab[edge] = 255
            self.images[i] = (img - 0.45) / 0.25
            self.labels[i] = lab

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {'image': torch.from_numpy(self.images[idx]), 'label': torch.from_numpy(self.labels[idx])}


class ASPP_module(nn.Module):
    def __init__(self, inplanes, planes, rate):
        super().__init__()
        kernel_size, padding = (1, 0) if rate == 1 else (3, rate)
        self.atrous_convolution = nn.Conv2d(inplanes, planes, kernel_size=kernel_size, stride=1,
                                            padding=padding, dilation=rate, bias=False)
        self.bn = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.atrous_convolution(x)))


def conv_bn(inp, out, stride=1, dilation=1):
    return nn.Sequential(nn.Conv2d(inp, out, 3, stride, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(out), nn.ReLU(inplace=True))


class DeepLabv3_plus(nn.Module):
    def __init__(self, nInputChannels=3, n_classes=21, os=16):
        super().__init__()
        self.entry = nn.Sequential(conv_bn(nInputChannels, 16, 2), conv_bn(16, 24))        # 1/2
        self.low_level = nn.Sequential(conv_bn(24, 32, 2), conv_bn(32, 32))                 # 1/4
        self.middle = nn.Sequential(conv_bn(32, 64, 2), conv_bn(64, 64, dilation=2),        # 1/8
                                    conv_bn(64, 64, dilation=2))
        rates = [1, 2, 4, 6]
        self.aspp1 = ASPP_module(64, 64, rate=rates[0])
        self.aspp2 = ASPP_module(64, 64, rate=rates[1])
        self.aspp3 = ASPP_module(64, 64, rate=rates[2])
        self.aspp4 = ASPP_module(64, 64, rate=rates[3])
        self.global_avg_pool = nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)),
                                             nn.Conv2d(64, 64, 1, stride=1, bias=False),
                                             nn.BatchNorm2d(64), nn.ReLU())
        self.conv1 = nn.Conv2d(320, 64, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(32, 16, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.last_conv = nn.Sequential(conv_bn(80, 64), conv_bn(64, 64),
                                       nn.Conv2d(64, n_classes, kernel_size=1, stride=1))

    def forward(self, input):
        x = self.entry(input)
        low_level_features = self.low_level(x)
        x = self.middle(low_level_features)
        x1, x2, x3, x4 = self.aspp1(x), self.aspp2(x), self.aspp3(x), self.aspp4(x)
        x5 = self.global_avg_pool(x)
        x5 = F.interpolate(x5, size=x4.size()[2:], mode='bilinear', align_corners=True)
        x = torch.cat((x1, x2, x3, x4, x5), dim=1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.interpolate(x, size=low_level_features.size()[2:], mode='bilinear', align_corners=True)
        low_level_features = F.relu(self.bn2(self.conv2(low_level_features)))
        x = torch.cat((x, low_level_features), dim=1)
        x = self.last_conv(x)
        return F.interpolate(x, size=input.size()[2:], mode='bilinear', align_corners=True)


def lr_poly(base_lr, iter_, max_iter=100, power=0.9):
    return base_lr * ((1 - float(iter_) / max_iter) ** power)


def get_iou(pred, gt, n_classes):
    ious = []
    valid = gt != 255
    for c in range(n_classes):
        inter = ((pred == c) & (gt == c) & valid).sum().item()
        union = (((pred == c) | (gt == c)) & valid).sum().item()
        if union > 0:
            ious.append(inter / union)
    return float(np.mean(ious))


net = DeepLabv3_plus(nInputChannels=3, n_classes=n_classes, os=16)
criterion = nn.CrossEntropyLoss(ignore_index=255)

optimizer = optim.SGD(net.parameters(), lr=p['lr'], momentum=p['momentum'], weight_decay=p['wd'])
p['optimizer'] = str(optimizer)

db_train = ShapesSegmentation(432, seed=0)
db_val = ShapesSegmentation(48, seed=1)
trainloader = DataLoader(db_train, batch_size=p['trainBatch'], shuffle=True, num_workers=0)
testloader = DataLoader(db_val, batch_size=testBatch, shuffle=False, num_workers=0)

num_img_tr = len(trainloader)
num_img_ts = len(testloader)
running_loss_tr = 0.0
aveGrad = 0
print("Training Network")

for epoch in range(resume_epoch, nEpochs):
    start_time = timeit.default_timer()

    if epoch % p['epoch_size'] == p['epoch_size'] - 1:
        lr_ = lr_poly(p['lr'], epoch, nEpochs, 0.9)
        print('(poly lr policy) learning rate: ', lr_)
        optimizer = optim.SGD(net.parameters(), lr=lr_, momentum=p['momentum'], weight_decay=p['wd'])

    net.train()
    for ii, sample_batched in enumerate(trainloader):
        inputs, labels = sample_batched['image'], sample_batched['label']

        outputs = net.forward(inputs)
        loss = criterion(outputs, labels)
        running_loss_tr += loss.item()

        if ii % 20 == 0:
            print('[Epoch: %d, iter: %3d] loss: %.4f' % (epoch, ii, loss.item()))

        loss /= p['nAveGrad']
        loss.backward()
        aveGrad += 1

        if aveGrad % p['nAveGrad'] == 0:
            optimizer.step()
            optimizer.zero_grad()
            aveGrad = 0

    running_loss_tr = running_loss_tr / num_img_tr
    print('[Epoch: %d, numImages: %5d]' % (epoch, len(db_train)))
    print('Loss: %f' % running_loss_tr)
    running_loss_tr = 0
    print("Execution time: " + str(timeit.default_timer() - start_time) + "\n")

    if epoch % nTestInterval == (nTestInterval - 1):
        net.eval()
        total_iou, running_loss_ts = 0.0, 0.0
        with torch.no_grad():
            for sample_batched in testloader:
                inputs, labels = sample_batched['image'], sample_batched['label']
                outputs = net.forward(inputs)
                running_loss_ts += criterion(outputs, labels).item()
                total_iou += get_iou(outputs.argmax(1), labels, n_classes)
        print('Validation: loss %.4f  mIoU %.3f' % (running_loss_ts / num_img_ts, total_iou / num_img_ts))
