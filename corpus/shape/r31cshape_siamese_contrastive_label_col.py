"""Facial similarity with a Siamese network and contrastive loss.

Pairs of face crops are labelled 0 (same person) or 1 (different people); the network
maps each crop to a small embedding and the contrastive loss pulls same-person pairs
together and pushes different-person pairs beyond a margin.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_PEOPLE = 24
IMG = 24


def make_faces(n_per_person, seed):
    rng = np.random.RandomState(seed)
    protos = np.random.RandomState(123).rand(N_PEOPLE, 1, IMG, IMG).astype(np.float32)
    imgs, ids = [], []
    for p in range(N_PEOPLE):
        for _ in range(n_per_person):
            img = protos[p] + 0.3 * rng.randn(1, IMG, IMG).astype(np.float32)
            img = np.roll(img, rng.randint(-2, 3), axis=2)
            imgs.append(img)
            ids.append(p)
    return np.stack(imgs), np.array(ids)


class SiameseNetworkDataset(Dataset):
    def __init__(self, imgs, ids, n_pairs, seed):
        self.imgs, self.ids = imgs, ids
        self.rng = np.random.RandomState(seed)
        self.n_pairs = n_pairs

    def __len__(self):
        return self.n_pairs

    def __getitem__(self, index):
        i = self.rng.randint(len(self.ids))
        should_get_same_class = self.rng.randint(2)
        while True:
            j = self.rng.randint(len(self.ids))
            if (self.ids[i] == self.ids[j]) == bool(should_get_same_class) and i != j:
                break
        label = torch.from_numpy(np.array([int(self.ids[i] != self.ids[j])], dtype=np.float32))
        return torch.from_numpy(self.imgs[i]), torch.from_numpy(self.imgs[j]), label


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn1 = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(inplace=True), nn.BatchNorm2d(8), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True), nn.BatchNorm2d(16), nn.MaxPool2d(2),
        )
        self.fc1 = nn.Sequential(
            nn.Linear(16 * 6 * 6, 128), nn.ReLU(inplace=True), nn.Linear(128, 16))

    def forward_once(self, x):
        output = self.cnn1(x)
        output = output.view(output.size(0), -1)
        return self.fc1(output)

    def forward(self, input1, input2):
        return self.forward_once(input1), self.forward_once(input2)


class ContrastiveLoss(nn.Module):
    def __init__(self, margin=2.0):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, label):
        euclidean_distance = F.pairwise_distance(output1, output2)
        loss_contrastive = torch.mean((1 - label) * torch.pow(euclidean_distance, 2) +
                                      label * torch.pow(torch.clamp(self.margin - euclidean_distance, min=0.0), 2))
        return loss_contrastive


def verification_accuracy(net, loader):
    net.eval()
    dists, labs = [], []
    with torch.no_grad():
        for img0, img1, label in loader:
            out0, out1 = net(img0, img1)
            dists.append(F.pairwise_distance(out0, out1))
            labs.append(label.view(-1))
    net.train()
    dist, lab = torch.cat(dists), torch.cat(labs)
    d_same, d_diff = dist[lab == 0].mean().item(), dist[lab == 1].mean().item()
    threshold = (d_same + d_diff) / 2
    acc = ((dist > threshold).float() == lab).float().mean().item()
    return acc, d_same, d_diff


train_imgs, train_ids = make_faces(20, seed=1)
val_imgs, val_ids = make_faces(6, seed=2)
train_dataloader = DataLoader(SiameseNetworkDataset(train_imgs, train_ids, 3200, seed=3),
                              shuffle=True, batch_size=64)
val_dataloader = DataLoader(SiameseNetworkDataset(val_imgs, val_ids, 640, seed=4), batch_size=128)

net = SiameseNetwork()
criterion = ContrastiveLoss()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

for epoch in range(4):
    running = 0.0
    for i, (img0, img1, label) in enumerate(train_dataloader):
        optimizer.zero_grad()
        output1, output2 = net(img0, img1)
        loss_contrastive = criterion(output1, output2, label)
        loss_contrastive.backward()
        optimizer.step()
        running += loss_contrastive.item()
    acc, ds, dd = verification_accuracy(net, val_dataloader)
    print(f"Epoch {epoch}: loss {running / len(train_dataloader):.4f}  "
          f"val acc {acc:.3f}  mean dist same {ds:.3f} / different {dd:.3f}")
