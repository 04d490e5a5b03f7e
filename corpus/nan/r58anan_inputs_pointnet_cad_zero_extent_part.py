"""PointNet classification on our own CAD parts library (point clouds sampled from the part meshes),
data loading adapted from pointnet.pytorch's ShapeNetDataset / train_classification.py."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

torch.manual_seed(0)
np.random.seed(0)

CLASSES = ["bracket", "bolt", "washer", "shaft", "plate", "housing", "gear", "pin"]


def sample_part(kind, n, rng):
    """Surface samples of a parametric part (stand-in for the exported mesh sampler)."""
    u, v = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    scale = rng.uniform(0.5, 3.0)
    if kind == 0:  # L bracket
        a = rng.random(n) < 0.5
        pts = np.where(a[:, None], np.c_[u * 2, v * 0.1, rng.uniform(0, 1, n)],
                       np.c_[u * 0.1, v * 2, rng.uniform(0, 1, n)])
    elif kind == 1:  # bolt: long thin cylinder + head
        t = 2 * np.pi * u
        r = np.where(v < 0.2, 0.6, 0.25)
        pts = np.c_[r * np.cos(t), r * np.sin(t), v * 3]
    elif kind == 2:  # washer: flat ring
        t = 2 * np.pi * u
        r = 0.5 + 0.5 * v
        pts = np.c_[r * np.cos(t), r * np.sin(t), rng.uniform(0, 0.1, n)]
    elif kind == 3:  # shaft
        t = 2 * np.pi * u
        pts = np.c_[0.3 * np.cos(t), 0.3 * np.sin(t), v * 5]
    elif kind == 4:  # plate
        pts = np.c_[u * 3, v * 2, rng.uniform(0, 0.05, n)]
    elif kind == 5:  # housing: hollow box
        face = rng.integers(0, 6, n)
        w = np.c_[u, v, np.zeros(n)]
        pts = np.where((face < 2)[:, None], np.c_[w[:, 0], w[:, 1], face % 2],
                       np.where((face < 4)[:, None], np.c_[w[:, 0], face % 2, w[:, 1]],
                                np.c_[face % 2, w[:, 0], w[:, 1]]))
    elif kind == 6:  # gear: ring with teeth
        t = 2 * np.pi * u
        r = 1.0 + 0.2 * (np.sin(12 * t) > 0)
        pts = np.c_[r * np.cos(t), r * np.sin(t), rng.uniform(0, 0.3, n)]
    else:  # pin: short cylinder with rounded end
        t = 2 * np.pi * u
        pts = np.c_[0.2 * np.cos(t), 0.2 * np.sin(t), v * 1.2]
    pts = pts * scale + rng.normal(0, 0.01, (n, 3))
    return pts.astype(np.float32)


def export_library(root, n_parts=600, n_points=500):
    """Writes one .pts file per part plus a train/test split, like the ShapeNet folder layout."""
    rng = np.random.default_rng(1)
    os.makedirs(os.path.join(root, "points"))
    names = []
    for i in range(n_parts):
        kind = int(rng.integers(0, len(CLASSES)))
        pts = sample_part(kind, n_points, rng)
        if i == 337:
            pts = np.zeros((n_points, 3), dtype=np.float32)
        name = f"{CLASSES[kind]}_{i:04d}"
        np.savetxt(os.path.join(root, "points", name + ".pts"), pts, fmt="%.6f")
        names.append(name)
    order = rng.permutation(n_parts)
    with open(os.path.join(root, "train.txt"), "w") as f:
        f.write("\n".join(names[j] for j in order[:520]))
    with open(os.path.join(root, "test.txt"), "w") as f:
        f.write("\n".join(names[j] for j in order[520:]))


class PartDataset(data.Dataset):
    def __init__(self, root, npoints=256, split="train", data_augmentation=True):
        self.npoints = npoints
        self.data_augmentation = data_augmentation
        with open(os.path.join(root, split + ".txt")) as f:
            names = f.read().split()
        self.datapath = [(os.path.join(root, "points", n + ".pts"), CLASSES.index(n.split("_")[0]))
                         for n in names]
        self.cache = {}

    def __getitem__(self, index):
        fn, cls = self.datapath[index]
        if fn not in self.cache:
            self.cache[fn] = np.loadtxt(fn).astype(np.float32)
        point_set = self.cache[fn]
        choice = np.random.choice(len(point_set), self.npoints, replace=True)
        point_set = point_set[choice, :]
        point_set = point_set - np.expand_dims(np.mean(point_set, axis=0), 0)  # center
        dist = np.max(np.sqrt(np.sum(point_set ** 2, axis=1)), 0)
        point_set = point_set / dist  # scale

        if self.data_augmentation:
            theta = np.random.uniform(0, np.pi * 2)
            rotation_matrix = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
            point_set[:, [0, 2]] = point_set[:, [0, 2]].dot(rotation_matrix)  # random rotation
            point_set += np.random.normal(0, 0.02, size=point_set.shape)  # random jitter

        return torch.from_numpy(point_set.astype(np.float32)), torch.tensor([cls])

    def __len__(self):
        return len(self.datapath)


class STN3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.conv3 = nn.Conv1d(64, 128, 1)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 9)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(32), nn.BatchNorm1d(64), nn.BatchNorm1d(128)
        self.bn4 = nn.BatchNorm1d(64)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2)[0]
        x = self.fc2(F.relu(self.bn4(self.fc1(x))))
        iden = torch.eye(3).flatten().unsqueeze(0)
        return (x + iden).view(-1, 3, 3)


class PointNetCls(nn.Module):
    def __init__(self, k=len(CLASSES)):
        super().__init__()
        self.stn = STN3d()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.conv3 = nn.Conv1d(64, 192, 1)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(32), nn.BatchNorm1d(64), nn.BatchNorm1d(192)
        self.fc1 = nn.Linear(192, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn4, self.bn5 = nn.BatchNorm1d(128), nn.BatchNorm1d(64)

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.dropout(self.fc2(x))))
        return F.log_softmax(self.fc3(x), dim=1), trans


def main():
    root = tempfile.mkdtemp(prefix="parts_")
    export_library(root)
    dataset = PartDataset(root, split="train")
    test_dataset = PartDataset(root, split="test", data_augmentation=False)
    dataloader = data.DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
    testdataloader = data.DataLoader(test_dataset, batch_size=32, shuffle=False)
    print(len(dataset), len(test_dataset), "classes", len(CLASSES))

    classifier = PointNetCls()
    optimizer = torch.optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
    num_batch = len(dataset) // 32

    for epoch in range(4):
        for i, (points, target) in enumerate(dataloader):
            target = target[:, 0]
            points = points.transpose(2, 1)
            optimizer.zero_grad()
            classifier = classifier.train()
            pred, trans = classifier(points)
            loss = F.nll_loss(pred, target)
            loss.backward()
            optimizer.step()
            if i % 5 == 0:
                correct = pred.data.max(1)[1].eq(target.data).cpu().sum()
                print("[%d: %d/%d] train loss: %f accuracy: %f" % (
                    epoch, i, num_batch, loss.item(), correct.item() / 32.0))
        scheduler.step()

        total_correct, total_testset = 0, 0
        classifier = classifier.eval()
        with torch.no_grad():
            for points, target in testdataloader:
                target = target[:, 0]
                pred, _ = classifier(points.transpose(2, 1))
                total_correct += pred.data.max(1)[1].eq(target.data).cpu().sum().item()
                total_testset += points.size()[0]
        print("epoch %d test accuracy %f" % (epoch, total_correct / float(total_testset)))


if __name__ == "__main__":
    main()
