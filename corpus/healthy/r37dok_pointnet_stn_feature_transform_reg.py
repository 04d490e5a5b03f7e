"""PointNet classifier as in fxia22/pointnet.pytorch (pointnet/model.py, train_classification.py):
an input STN3d and a feature STNkd predict transforms that are added to the identity, the feature
transform is kept near-orthogonal by feature_transform_regularizer * 0.001, log_softmax + nll_loss.
ModelNet is replaced by synthetic point clouds of 4 shapes, randomly rotated about z and jittered."""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = torch.nn.Conv1d(3, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.conv3 = torch.nn.Conv1d(64, 256, 1)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 9)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(256)
        self.bn4 = nn.BatchNorm1d(128)
        self.bn5 = nn.BatchNorm1d(64)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 256)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        iden = Variable(torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))).view(1, 9).repeat(batchsize, 1)
        x = x + iden
        x = x.view(-1, 3, 3)
        return x


class STNkd(nn.Module):
    def __init__(self, k=64):
        super(STNkd, self).__init__()
        self.conv1 = torch.nn.Conv1d(k, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.conv3 = torch.nn.Conv1d(64, 256, 1)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, k * k)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(256)
        self.bn4 = nn.BatchNorm1d(128)
        self.bn5 = nn.BatchNorm1d(64)
        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 256)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(1, self.k * self.k).repeat(batchsize, 1)
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetfeat(nn.Module):
    def __init__(self, global_feat=True, feature_transform=False):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = torch.nn.Conv1d(3, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.conv3 = torch.nn.Conv1d(64, 256, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(256)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=32)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2, 1)
        else:
            trans_feat = None
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 256)
        return x, trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k=4, feature_transform=False):
        super(PointNetCls, self).__init__()
        self.feature_transform = feature_transform
        self.feat = PointNetfeat(global_feat=True, feature_transform=feature_transform)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn1 = nn.BatchNorm1d(128)
        self.bn2 = nn.BatchNorm1d(64)
        self.relu = nn.ReLU()

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    batchsize = trans.size()[0]
    I = torch.eye(d)[None, :, :]
    loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))
    return loss


class ShapeClouds(Dataset):
    """sphere, cube surface, cylinder, cone: 128 points each, random z-rotation, scale and jitter."""
    def __init__(self, n, seed, npoints=128):
        rng = np.random.RandomState(seed)
        self.points, self.labels = [], []
        for i in range(n):
            c = rng.randint(4)
            u = rng.uniform(-1, 1, npoints)
            phi = rng.uniform(0, 2 * math.pi, npoints)
            if c == 0:
                p = np.stack([np.sqrt(1 - u ** 2) * np.cos(phi), np.sqrt(1 - u ** 2) * np.sin(phi), u], 1)
            elif c == 1:
                p = rng.uniform(-1, 1, (npoints, 3))
                face = rng.randint(3, size=npoints)
                p[np.arange(npoints), face] = np.sign(rng.uniform(-1, 1, npoints))
            elif c == 2:
                p = np.stack([np.cos(phi), np.sin(phi), u], 1)
            else:
                r = (1 - u) / 2
                p = np.stack([r * np.cos(phi), r * np.sin(phi), u], 1)
            theta = rng.uniform(0, 2 * math.pi)
            rot = np.array([[math.cos(theta), -math.sin(theta), 0], [math.sin(theta), math.cos(theta), 0], [0, 0, 1]])
            p = p.dot(rot) * rng.uniform(0.8, 1.2) + rng.normal(0, 0.02, p.shape)
            self.points.append(p.astype(np.float32))
            self.labels.append(c)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.points[i]), torch.tensor([self.labels[i]])


def main():
    dataset = ShapeClouds(512, 1)
    test_dataset = ShapeClouds(256, 2)
    dataloader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
    testdataloader = DataLoader(test_dataset, batch_size=64)
    classifier = PointNetCls(k=4, feature_transform=True)
    optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
    num_batch = len(dataset) / 32
    for epoch in range(4):
        for i, data in enumerate(dataloader, 0):
            points, target = data
            target = target[:, 0]
            points = points.transpose(2, 1)
            optimizer.zero_grad()
            classifier = classifier.train()
            pred, trans, trans_feat = classifier(points)
            loss = F.nll_loss(pred, target)
            if classifier.feature_transform:
                loss += feature_transform_regularizer(trans_feat) * 0.001
            loss.backward()
            optimizer.step()
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.data).cpu().sum()
            if i % 10 == 0:
                print('[%d: %d/%d] train loss: %f accuracy: %f reg: %f' % (
                    epoch, i, num_batch, loss.item(), correct.item() / float(32),
                    feature_transform_regularizer(trans_feat).item()))
        scheduler.step()
        total_correct, total_testset = 0, 0
        classifier = classifier.eval()
        with torch.no_grad():
            for points, target in testdataloader:
                target = target[:, 0]
                pred, _, _ = classifier(points.transpose(2, 1))
                total_correct += pred.max(1)[1].eq(target).sum().item()
                total_testset += points.size()[0]
        print("epoch %d test accuracy %f" % (epoch, total_correct / float(total_testset)))


if __name__ == '__main__':
    main()
