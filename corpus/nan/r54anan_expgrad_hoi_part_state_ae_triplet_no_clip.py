"""Autoencoder pre-training of body-part state features (HAKE-style AE stage): an MLP
encoder/decoder reconstructs the pooled part features while a semi-hard triplet loss on the
latent code groups samples by their action label."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

FEAT_DIM = 64
LATENT = 16
N_ACTIONS = 6


def make_part_features(n):
    labels = torch.randint(0, N_ACTIONS, (n,))
    protos = torch.randn(N_ACTIONS, FEAT_DIM) * 1.5
    feats = protos[labels] + 0.5 * torch.randn(n, FEAT_DIM)
    occluded = torch.rand(n) < 0.02
    feats[occluded] *= torch.empty(int(occluded.sum()), 1).uniform_(20, 60)
    return feats, labels


class PartStateDataset(Dataset):
    def __init__(self, feats, labels):
        self.feats, self.labels = feats, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.feats[idx], self.labels[idx]


class PartAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(FEAT_DIM, 256), nn.ReLU(),
            nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, LATENT),
        )
        self.decoder = nn.Sequential(
            nn.Linear(LATENT, 64), nn.ReLU(),
            nn.Linear(64, 128), nn.ReLU(),
            nn.Linear(128, 256), nn.ReLU(),
            nn.Linear(256, FEAT_DIM),
        )

    def forward(self, x):
        z = self.encoder(x)
        return z, self.decoder(z)


def semihard_triplet_loss(z, labels, margin=1.0):
    d = torch.cdist(z, z)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos_mask = same & ~eye
    losses = []
    for a in range(len(labels)):
        pos = d[a][pos_mask[a]]
        neg = d[a][~same[a]]
        if len(pos) == 0 or len(neg) == 0:
            continue
        ap = pos.max()
        semi = neg[neg > ap]
        an = semi.min() if len(semi) > 0 else neg.max()
        losses.append(F.relu(ap - an + margin))
    return torch.stack(losses).mean()


feats, labels = make_part_features(3600)
loader = DataLoader(PartStateDataset(feats[:3200], labels[:3200]), batch_size=64, shuffle=True)
val_x, val_y = feats[3200:], labels[3200:]

model = PartAE()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

step = 0
for epoch in range(3):
    sum_rec, sum_tri = 0.0, 0.0
    for x, y in loader:
        z, x_hat = model(x)
        l_rec = F.mse_loss(x_hat, x)
        l_tri = semihard_triplet_loss(z, y)
        loss = l_rec + 0.5 * l_tri
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        sum_rec += l_rec.item()
        sum_tri += l_tri.item()
        if step % 10 == 0:
            print(f"epoch {epoch} iter {step} L_rec {l_rec.item():.4f} L_tri {l_tri.item():.4f} loss {loss.item():.4f}")
    with torch.no_grad():
        z_val, rec_val = model(val_x)
        per_sample = ((rec_val - val_x) ** 2).mean(dim=1)
        nearest = torch.cdist(z_val, z_val).fill_diagonal_(float("inf")).argmin(dim=1)
        nn_acc = (val_y[nearest] == val_y).float().mean().item()
    print(f"epoch {epoch} done: L_rec {sum_rec / len(loader):.4f} L_tri {sum_tri / len(loader):.4f} "
          f"val median rec {per_sample.median().item():.4f} val 1-NN acc {nn_acc:.3f}")
