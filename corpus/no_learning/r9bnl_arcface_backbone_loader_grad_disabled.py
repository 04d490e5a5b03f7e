"""Face recognition with an ArcFace margin head (arcface-pytorch style train.py).

A small ResNet-style backbone maps 1x32x32 face crops to a 128-d embedding and an
ArcMarginProduct layer scores it against one learnable centre per identity. The
backbone comes from `load_backbone`, the helper shared with the verification script.

Synthetic data: 24 identities, each a fixed random "face" template; every sample is
its template with a random shift, brightness change and pixel noise.
"""
import os
import math
import time
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import data


class Config(object):
    num_classes = 24
    train_batch_size = 32
    max_epoch = 4
    print_freq = 20
    lr = 1e-1
    lr_step = 10
    weight_decay = 5e-4
    optimizer = 'sgd'
    checkpoints_path = None


class FaceDataset(data.Dataset):
    def __init__(self, n_per_class, num_classes, seed=0):
        g = torch.Generator().manual_seed(1234)
        templates = F.avg_pool2d(torch.randn(num_classes, 1, 40, 40, generator=g), 3, 1, 1)
        g = torch.Generator().manual_seed(seed)
        imgs, labels = [], []
        for c in range(num_classes):
            for _ in range(n_per_class):
                dx, dy = torch.randint(0, 9, (2,), generator=g).tolist()
                img = templates[c, :, dy:dy + 32, dx:dx + 32]
                img = img * (0.8 + 0.4 * torch.rand(1, generator=g)) + 0.3 * torch.randn(1, 32, 32, generator=g)
                imgs.append(img)
                labels.append(c)
        self.imgs = torch.stack(imgs)
        self.labels = torch.tensor(labels)

    def __getitem__(self, index):
        return self.imgs[index], self.labels[index]

    def __len__(self):
        return len(self.labels)


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.bn0 = nn.BatchNorm2d(inplanes)
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        residual = x
        out = self.prelu(self.bn1(self.conv1(self.bn0(x))))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self.prelu(out + residual)


class ResNetFace(nn.Module):
    def __init__(self, embedding_size=128):
        super(ResNetFace, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.prelu = nn.PReLU()
        self.layer1 = BasicBlock(32, 32, 2)
        self.layer2 = BasicBlock(32, 64, 2)
        self.layer3 = BasicBlock(64, 64, 2)
        self.bn4 = nn.BatchNorm2d(64)
        self.dropout = nn.Dropout()
        self.fc5 = nn.Linear(64 * 4 * 4, embedding_size)
        self.bn5 = nn.BatchNorm1d(embedding_size)

    def forward(self, x):
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = self.dropout(self.bn4(x))
        x = x.view(x.size(0), -1)
        return self.bn5(self.fc5(x))


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super(ArcMarginProduct, self).__init__()
        self.s = s
        self.m = m
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.cos_m = math.cos(m)
        self.sin_m = math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size())
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        return output * self.s


def load_backbone(checkpoint=None):
    torch.set_grad_enabled(False)
    model = ResNetFace()
    if checkpoint is not None and os.path.exists(checkpoint):
        model.load_state_dict(torch.load(checkpoint, map_location='cpu'))
    model.eval()
    return model


def save_model(model, save_path, name, iter_cnt):
    save_name = os.path.join(save_path, name + '_' + str(iter_cnt) + '.pth')
    torch.save(model.state_dict(), save_name)
    return save_name


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    opt = Config()
    opt.checkpoints_path = tempfile.mkdtemp()

    train_dataset = FaceDataset(n_per_class=40, num_classes=opt.num_classes)
    trainloader = data.DataLoader(train_dataset, batch_size=opt.train_batch_size, shuffle=True)
    print('{} train iters per epoch:'.format(len(trainloader)))

    criterion = nn.CrossEntropyLoss()
    model = load_backbone(os.path.join(opt.checkpoints_path, 'resnet_face_pretrained.pth'))
    metric_fc = ArcMarginProduct(128, opt.num_classes, s=30, m=0.5, easy_margin=False)

    if opt.optimizer == 'sgd':
        optimizer = torch.optim.SGD([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                                    lr=opt.lr, weight_decay=opt.weight_decay)
    else:
        optimizer = torch.optim.Adam([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                                     lr=opt.lr, weight_decay=opt.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=opt.lr_step, gamma=0.1)

    start = time.time()
    for i in range(opt.max_epoch):
        model.train()
        for ii, (data_input, label) in enumerate(trainloader):
            feature = model(data_input)
            output = metric_fc(feature, label)
            loss = criterion(output, label)
            loss.requires_grad = True
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            iters = i * len(trainloader) + ii
            if iters % opt.print_freq == 0:
                output = np.argmax(output.data.cpu().numpy(), axis=1)
                acc = np.mean((output == label.data.cpu().numpy()).astype(int))
                speed = opt.print_freq / (time.time() - start)
                print('train epoch {} iter {} {:.2f} iters/s loss {:.4f} acc {:.3f}'.format(i, ii, speed, loss.item(), acc))
                start = time.time()
        scheduler.step()
        save_model(model, opt.checkpoints_path, 'resnet_face', i)
