"""Implicit shape reconstruction: an auto-decoder (one latent code per training shape) with an MLP
occupancy decoder f(z, x) trained on sampled points of synthetic 3D shapes, then evaluated by
reloading the best checkpoint and measuring IoU on held-out query points."""
import os
import tempfile
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

config = {"num_shapes": 32, "points_per_shape": 512, "latent_dim": 16, "hidden": 128,
          "batch_size": 4, "epochs": 12, "lr": 5e-3}
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
out_dir = tempfile.mkdtemp(prefix="isr_")


def shape_params(n, rng):
    centers = rng.uniform(-0.2, 0.2, size=(n, 3))
    radii = rng.uniform(0.5, 0.9, size=(n, 3))
    return centers.astype(np.float32), radii.astype(np.float32)


def occupancy(points, center, radii):
    return (((points - center) / radii) ** 2).sum(-1) <= 1.0


class ShapeDataset(Dataset):
    def __init__(self, n, points, seed):
        rng = np.random.RandomState(seed)
        self.centers, self.radii = shape_params(n, rng)
        self.points = rng.uniform(-1, 1, size=(n, points, 3)).astype(np.float32)
        self.occ = np.stack([occupancy(self.points[i], self.centers[i], self.radii[i])
                             for i in range(n)]).astype(np.float32)

    def __len__(self):
        return len(self.points)

    def __getitem__(self, idx):
        return idx, torch.from_numpy(self.points[idx]), torch.from_numpy(self.occ[idx])


class ImplicitNet(nn.Module):
    def __init__(self, latent_dim, hidden):
        super().__init__()
        self.fc_in = nn.Linear(latent_dim + 3, hidden)
        self.blocks = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU())
        self.fc_out = nn.Linear(hidden, 1)

    def forward(self, z, x):
        z = z.unsqueeze(1).expand(-1, x.shape[1], -1)
        h = F.relu(self.fc_in(torch.cat([z, x], dim=-1)))
        h = self.blocks(h)
        return self.fc_out(h).squeeze(-1)


def train(dataset):
    loader = DataLoader(dataset, batch_size=config["batch_size"], shuffle=True)
    net = ImplicitNet(config["latent_dim"], config["hidden"])
    net = nn.DataParallel(net).to(device)
    latents = nn.Embedding(len(dataset), config["latent_dim"])
    nn.init.normal_(latents.weight, std=0.01)
    optimizer = torch.optim.Adam([{"params": net.parameters()}, {"params": latents.parameters()}], lr=config["lr"])
    best_loss = float("inf")
    step = 0
    for epoch in range(config["epochs"]):
        net.train()
        epoch_loss = 0.0
        for idx, points, occ in loader:
            points, occ = points.to(device), occ.to(device)
            z = latents(idx.to(device))
            logits = net(z, points)
            loss = F.binary_cross_entropy_with_logits(logits, occ) + 1e-4 * z.pow(2).sum(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            step += 1
            if step % 5 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        epoch_loss /= len(loader)
        print(f"epoch {epoch} mean loss {epoch_loss:.4f}")
        if epoch_loss < best_loss:
            best_loss = epoch_loss
            torch.save({"epoch": epoch, "net_state": net.state_dict(), "latents": latents.state_dict()},
                       os.path.join(out_dir, "best.pth"))
    return best_loss


def evaluate(dataset, ckpt_path):
    checkpoint = torch.load(ckpt_path, map_location=device)
    net = ImplicitNet(config["latent_dim"], config["hidden"]).to(device)
    net.load_state_dict(checkpoint["net_state"], strict=True)
    latents = nn.Embedding(len(dataset), config["latent_dim"])
    latents.load_state_dict(checkpoint["latents"])
    net.eval()
    rng = np.random.RandomState(123)
    ious = []
    with torch.no_grad():
        for i in range(len(dataset)):
            q = rng.uniform(-1, 1, size=(2048, 3)).astype(np.float32)
            gt = occupancy(q, dataset.centers[i], dataset.radii[i])
            pred = net(latents.weight[i:i + 1], torch.from_numpy(q)[None])[0] > 0
            pred = pred.cpu().numpy()
            ious.append((pred & gt).sum() / max((pred | gt).sum(), 1))
    print(f"loaded epoch {checkpoint['epoch']}: mean IoU {np.mean(ious):.4f}")
    return float(np.mean(ious))


train_set = ShapeDataset(config["num_shapes"], config["points_per_shape"], seed=0)
best = train(train_set)
print(f"best train loss {best:.4f}")
evaluate(train_set, os.path.join(out_dir, "best.pth"))
