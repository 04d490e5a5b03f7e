"""Joint semantic-instance segmentation of indoor point clouds (JSIS3D-style MT-PNet on my own
scans): a PointNet backbone with a semantic head (NLL loss) and an instance-embedding head
trained with the discriminative loss (pull points to their instance centroid, push centroids
apart, keep centroids small). Each training sample is a random subset of NUM_POINTS points from
a scanned room; masks hold one column per instance of the room.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

NUM_CLASSES = 6
MAX_INSTANCES = 10
NUM_POINTS = 1024
EMBED_DIM = 5
BATCH_SIZE = 8
EPOCHS = 4
LR = 1e-3


def make_room(rng):
    n_inst = rng.integers(3, MAX_INSTANCES + 1)
    points, sem, inst = [], [], []
    for k in range(n_inst):
        cls = rng.integers(0, NUM_CLASSES)
        center = rng.uniform([0, 0, 0], [8, 8, 2.5])
        extent = rng.uniform(0.2, 1.5, 3)
        n_pts = int(rng.choice([rng.integers(20, 60), rng.integers(800, 6000)], p=[0.06, 0.94]))
        xyz = center + rng.uniform(-1, 1, (n_pts, 3)) * extent
        rgb = np.clip(rng.normal(0.2 + 0.12 * cls, 0.05, (n_pts, 3)), 0, 1)
        points.append(np.concatenate([xyz, rgb], 1))
        sem.append(np.full(n_pts, cls))
        inst.append(np.full(n_pts, k))
    return (np.concatenate(points).astype(np.float32), np.concatenate(sem), np.concatenate(inst),
            n_inst)


class RoomDataset(Dataset):
    def __init__(self, n_rooms, seed):
        rng = np.random.default_rng(seed)
        self.rooms = [make_room(rng) for _ in range(n_rooms)]
        self.rng = np.random.default_rng(seed + 1)

    def __len__(self):
        return len(self.rooms)

    def __getitem__(self, idx):
        points, sem, inst, n_inst = self.rooms[idx]
        choice = self.rng.choice(len(points), NUM_POINTS, replace=len(points) < NUM_POINTS)
        pts = points[choice].copy()
        pts[:, :3] -= pts[:, :3].mean(0)
        masks = np.zeros((NUM_POINTS, MAX_INSTANCES), dtype=np.float32)
        masks[np.arange(NUM_POINTS), inst[choice]] = 1.0
        return (torch.from_numpy(pts), torch.from_numpy(sem[choice]).long(),
                torch.from_numpy(masks), torch.tensor(n_inst))


class MTPNet(nn.Module):
    def __init__(self, in_dim=6, num_classes=NUM_CLASSES, embed_dim=EMBED_DIM):
        super().__init__()
        self.local = nn.Sequential(
            nn.Conv1d(in_dim, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 64, 1), nn.BatchNorm1d(64), nn.ReLU())
        self.glob = nn.Sequential(
            nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 256, 1), nn.BatchNorm1d(256), nn.ReLU())
        self.fuse = nn.Sequential(nn.Conv1d(64 + 256, 128, 1), nn.BatchNorm1d(128), nn.ReLU())
        self.sem_head = nn.Conv1d(128, num_classes, 1)
        self.ins_head = nn.Conv1d(128, embed_dim, 1)

    def forward(self, x):
        x = x.transpose(1, 2)
        local = self.local(x)
        g = self.glob(local).max(2, keepdim=True)[0].expand(-1, -1, x.size(2))
        h = self.fuse(torch.cat([local, g], 1))
        logits = F.log_softmax(self.sem_head(h), dim=1).transpose(1, 2)
        embedded = self.ins_head(h).transpose(1, 2)
        return logits, embedded


class DiscriminativeLoss(nn.Module):
    def __init__(self, delta_d, delta_v, alpha=1.0, beta=1.0, gamma=0.001):
        super().__init__()
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.delta_d, self.delta_v = delta_d, delta_v

    def forward(self, embedded, masks, size):
        centroids = self._centroids(embedded, masks, size)
        L_v = self._variance(embedded, masks, centroids, size)
        L_d = self._distance(centroids, size)
        L_r = self._regularization(centroids, size)
        return self.alpha * L_v + self.beta * L_d + self.gamma * L_r

    def _centroids(self, embedded, masks, size):
        batch_size, _, embedding_size = embedded.shape
        K = masks.size(2)
        x = embedded.unsqueeze(2).expand(-1, -1, K, -1) * masks.unsqueeze(3)
        masks = masks.unsqueeze(3)
        centroids = []
        for i in range(batch_size):
            n = int(size[i])
            mu = x[i, :, :n].sum(0) / masks[i, :, :n].sum(0)
            if K > n:
                mu = torch.cat([mu, torch.zeros(K - n, embedding_size)], dim=0)
            centroids.append(mu)
        return torch.stack(centroids)

    def _variance(self, embedded, masks, centroids, size):
        num_points, K = embedded.size(1), masks.size(2)
        mu = centroids.unsqueeze(1).expand(-1, num_points, -1, -1)
        x = embedded.unsqueeze(2).expand(-1, -1, K, -1)
        var = torch.clamp(torch.norm(x - mu, 2, dim=3) - self.delta_v, min=0.0) ** 2
        var = var * masks
        loss = 0.0
        for i in range(embedded.size(0)):
            n = int(size[i])
            loss += torch.sum(var[i, :, :n]) / torch.sum(masks[i, :, :n])
        return loss / embedded.size(0)

    def _distance(self, centroids, size):
        loss = 0.0
        for i in range(centroids.size(0)):
            n = int(size[i])
            if n <= 1:
                continue
            mu = centroids[i, :n, :]
            diff = mu.unsqueeze(1) - mu.unsqueeze(0)
            norm = torch.norm(diff, 2, dim=2)
            margin = 2 * self.delta_d * (1.0 - torch.eye(n))
            distance = torch.sum(torch.clamp(margin - norm, min=0.0) ** 2) / float(n * (n - 1))
            loss += distance
        return loss / centroids.size(0)

    def _regularization(self, centroids, size):
        loss = 0.0
        for i in range(centroids.size(0)):
            n = int(size[i])
            norm = torch.norm(centroids[i, :n, :], 2, dim=1)
            loss += torch.mean(norm)
        return loss / centroids.size(0)


def main():
    train_set = RoomDataset(96, seed=3)
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    model = MTPNet()
    criterion = {
        "discriminative": DiscriminativeLoss(delta_d=1.5, delta_v=0.5),
        "nll": nn.NLLLoss(),
    }
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=1e-4)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        total, correct, seen = 0.0, 0, 0
        for points, labels, masks, size in loader:
            logits, embedded = model(points)
            loss = criterion["nll"](logits.reshape(-1, NUM_CLASSES), labels.reshape(-1))
            loss += criterion["discriminative"](embedded, masks, size)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            total += loss.item()
            correct += (logits.argmax(2) == labels).sum().item()
            seen += labels.numel()
            print(f"epoch {epoch} iter {step} loss {loss.item():.4f}")
        print(f"epoch {epoch} mean loss {total / len(loader):.4f} point acc {correct / seen:.3f}")


if __name__ == "__main__":
    main()
