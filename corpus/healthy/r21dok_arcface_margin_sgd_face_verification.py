"""ArcFace (additive angular margin) training after ronghuaiyang/arcface-pytorch train.py, on
synthetic 16x16 "face" crops: each identity is a random smooth template, each image of it a
shifted, re-lit, noisy copy. A small ResNet-style backbone gives a 128-d BatchNorm'd feature,
ArcMarginProduct(s=30, m=0.5) turns it into margin-scaled cosine logits for CrossEntropyLoss,
SGD lr 0.1 with weight decay and StepLR. Evaluation is LFW-style verification on identities
never seen in training: cosine similarity of pairs, best threshold accuracy.
"""
from __future__ import print_function

import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter
from torch.optim.lr_scheduler import StepLR
from torch.utils import data


class Config(object):
    backbone = "resnet_face"
    metric = "arc_margin"
    easy_margin = False
    num_classes = 40
    train_batch_size = 32
    test_batch_size = 64
    optimizer = "sgd"
    lr = 1e-1
    lr_step = 4
    weight_decay = 5e-4
    max_epoch = 6
    print_freq = 10
    num_workers = 0


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super(ArcMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.s = s
        self.m = m
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
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
        one_hot = torch.zeros(cosine.size(), device=input.device)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output *= self.s
        return output


class IRBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super(IRBlock, self).__init__()
        self.bn0 = nn.BatchNorm2d(inplanes)
        self.conv1 = nn.Conv2d(inplanes, inplanes, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        residual = x
        out = self.bn0(x)
        out = self.prelu(self.bn1(self.conv1(out)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self.prelu(out + residual)


class ResNetFace(nn.Module):
    def __init__(self, feat_dim=128):
        super(ResNetFace, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.prelu = nn.PReLU()
        self.layer1 = IRBlock(16, 32, stride=2)
        self.layer2 = IRBlock(32, 64, stride=2)
        self.bn4 = nn.BatchNorm2d(64)
        self.dropout = nn.Dropout()
        self.fc5 = nn.Linear(64 * 4 * 4, feat_dim)
        self.bn5 = nn.BatchNorm1d(feat_dim)

    def forward(self, x):
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = self.bn4(x)
        x = self.dropout(x)
        x = x.view(x.size(0), -1)
        return self.bn5(self.fc5(x))


def make_identities(n_ids, gen):
    mean_face = F.interpolate(torch.randn(1, 1, 4, 4, generator=gen), size=16, mode="bilinear", align_corners=False)
    t = F.interpolate(torch.randn(n_ids, 1, 6, 6, generator=gen), size=16, mode="bilinear", align_corners=False)
    t = mean_face / mean_face.std() + 0.5 * t / t.std(dim=(1, 2, 3), keepdim=True)
    return t


def render(templates, ids, gen):
    n = len(ids)
    imgs = templates[ids] * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=gen))
    imgs = imgs + 0.3 * torch.randn(n, 1, 1, 1, generator=gen) + 0.8 * torch.randn(n, 1, 16, 16, generator=gen)
    shifts = torch.randint(-1, 2, (n, 2), generator=gen)
    return torch.stack([torch.roll(im, (int(a), int(b)), dims=(1, 2)) for im, (a, b) in zip(imgs, shifts)])


class Dataset(data.Dataset):
    def __init__(self, imgs, labels):
        self.imgs, self.labels = imgs, labels

    def __getitem__(self, index):
        return self.imgs[index], self.labels[index]

    def __len__(self):
        return len(self.labels)


def get_featurs(model, imgs, batch_size=64):
    feats = []
    with torch.no_grad():
        for i in range(0, len(imgs), batch_size):
            feats.append(model(imgs[i:i + batch_size]))
    return torch.cat(feats)


def cal_accuracy(y_score, y_true):
    best_acc, best_th = 0, 0
    for th in np.sort(y_score):
        acc = np.mean((y_score >= th).astype(int) == y_true)
        if acc > best_acc:
            best_acc, best_th = acc, th
    return best_acc, best_th


def verification_test(model, pair_imgs, pair_labels):
    a = get_featurs(model, pair_imgs[:, 0])
    b = get_featurs(model, pair_imgs[:, 1])
    sims = F.cosine_similarity(a, b).numpy()
    return cal_accuracy(sims, pair_labels.numpy())


if __name__ == "__main__":
    opt = Config()
    torch.manual_seed(0)
    device = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)

    templates = make_identities(opt.num_classes + 20, gen)
    train_ids = torch.arange(opt.num_classes).repeat_interleave(30)
    train_dataset = Dataset(render(templates, train_ids, gen), train_ids)
    trainloader = data.DataLoader(train_dataset, batch_size=opt.train_batch_size, shuffle=True,
                                  num_workers=opt.num_workers)

    n_pairs = 300
    same = torch.rand(n_pairs, generator=gen) < 0.5
    id_a = opt.num_classes + torch.randint(0, 20, (n_pairs,), generator=gen)
    id_b = torch.where(same, id_a, opt.num_classes + (id_a - opt.num_classes + torch.randint(1, 20, (n_pairs,), generator=gen)) % 20)
    pair_imgs = torch.stack([render(templates, id_a, gen), render(templates, id_b, gen)], dim=1)
    pair_labels = same.long()

    print("{} train iters per epoch:".format(len(trainloader)))
    criterion = torch.nn.CrossEntropyLoss()
    model = ResNetFace()
    metric_fc = ArcMarginProduct(128, opt.num_classes, s=30, m=0.5, easy_margin=opt.easy_margin)
    model.to(device)
    metric_fc.to(device)

    model.eval()
    acc, th = verification_test(model, pair_imgs, pair_labels)
    print("before training: face verification accuracy: ", acc, "threshold: ", th)

    optimizer = torch.optim.SGD([{"params": model.parameters()}, {"params": metric_fc.parameters()}],
                                lr=opt.lr, weight_decay=opt.weight_decay)
    scheduler = StepLR(optimizer, step_size=opt.lr_step, gamma=0.1)

    start = time.time()
    for i in range(opt.max_epoch):
        scheduler.step()

        model.train()
        for ii, (data_input, label) in enumerate(trainloader):
            data_input = data_input.to(device)
            label = label.to(device).long()
            feature = model(data_input)
            output = metric_fc(feature, label)
            loss = criterion(output, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            iters = i * len(trainloader) + ii
            if iters % opt.print_freq == 0:
                output = output.data.cpu().numpy()
                output = np.argmax(output, axis=1)
                label = label.data.cpu().numpy()
                acc = np.mean((output == label).astype(int))
                speed = opt.print_freq / (time.time() - start)
                print("train epoch {} iter {} {:.1f} iters/s lr {} loss {} acc {}".format(
                    i, ii, speed, optimizer.param_groups[0]["lr"], loss.item(), acc))
                start = time.time()

        model.eval()
        acc, th = verification_test(model, pair_imgs, pair_labels)
        print("face verification accuracy: ", acc, "threshold: ", th)
