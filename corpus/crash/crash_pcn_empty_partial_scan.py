"""PCN-style point cloud completion: encode a partial scan, decode the complete shape.

Each sample is a complete cloud (the ground truth) and a partial "scan" of it, the
points seen from one viewpoint. The partial cloud is resampled to a fixed size.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as Data


def setup_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def resample_pcd(pcd, n):
    """Drop or duplicate points so that pcd has exactly n points"""
    idx = np.random.permutation(pcd.shape[0])
    if idx.shape[0] < n:
        idx = np.concatenate([idx, np.random.randint(pcd.shape[0], size=n - pcd.shape[0])])
    return pcd[idx[:n]]


MAX_RANGE = 2.6     # sensor range of the virtual scanner


def make_shapes(num_shapes, num_points, rng):
    """Ellipsoids of random size and orientation, each scanned from a random camera position."""
    completes, partials = [], []
    for _ in range(num_shapes):
        axes = rng.uniform(0.3, 1.0, size=3)
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        p = rng.normal(size=(num_points, 3))
        p /= np.linalg.norm(p, axis=1, keepdims=True)
        p = (p * axes) @ q.T
        view = rng.normal(size=3)
        view /= np.linalg.norm(view)
        camera = view * rng.lognormal(np.log(2.0), 0.15)
        dist = np.linalg.norm(p - camera, axis=1)
        seen = (p @ view > 0.2 * np.abs(p @ view).max()) & (dist < MAX_RANGE)
        completes.append(p.astype(np.float32))
        partials.append(p[seen].astype(np.float32))
    return completes, partials


class ShapeNet(Data.Dataset):
    def __init__(self, completes, partials, num_input=128, num_coarse=64):
        self.completes = completes
        self.partials = partials
        self.num_input = num_input
        self.num_coarse = num_coarse

    def __len__(self):
        return len(self.completes)

    def __getitem__(self, index):
        partial_input = self.partials[index]
        complete = self.completes[index]
        partial_input = resample_pcd(partial_input, self.num_input)
        coarse_gt = resample_pcd(complete, self.num_coarse)
        return torch.from_numpy(partial_input), torch.from_numpy(coarse_gt)


class PCN(nn.Module):
    def __init__(self, num_coarse=64):
        super().__init__()
        self.num_coarse = num_coarse
        self.first_conv = nn.Sequential(nn.Conv1d(3, 64, 1), nn.ReLU(), nn.Conv1d(64, 128, 1))
        self.second_conv = nn.Sequential(nn.Conv1d(256, 256, 1), nn.ReLU(), nn.Conv1d(256, 256, 1))
        self.mlp = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 3 * num_coarse))

    def forward(self, xyz):
        B, N, _ = xyz.shape
        feature = self.first_conv(xyz.transpose(2, 1))                        # (B, 128, N)
        feature_global = torch.max(feature, dim=2, keepdim=True)[0]            # (B, 128, 1)
        feature = torch.cat([feature_global.expand(-1, -1, N), feature], dim=1)
        feature = self.second_conv(feature)
        feature_global = torch.max(feature, dim=2)[0]                          # (B, 256)
        return self.mlp(feature_global).reshape(-1, self.num_coarse, 3)


def chamfer_distance(p1, p2):
    d = torch.cdist(p1, p2)
    return d.min(dim=2)[0].mean() + d.min(dim=1)[0].mean()


def train():
    setup_seed(11)
    rng = np.random.default_rng(11)
    completes, partials = make_shapes(1200, 512, rng)
    train_dataset = ShapeNet(completes, partials)
    train_dataloader = Data.DataLoader(train_dataset, batch_size=16, shuffle=True)

    network = PCN()
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)

    for epoch in range(1, 4):
        network.train()
        total_loss, n = 0.0, 0
        for i, (partial_input, coarse_gt) in enumerate(train_dataloader):
            optimizer.zero_grad()
            coarse_pred = network(partial_input)
            loss = chamfer_distance(coarse_pred, coarse_gt)
            loss.backward()
            optimizer.step()

            total_loss += loss.item()
            n += 1
            if i % 10 == 0:
                print("epoch {} iter {:3d}/{} CD {:.5f}".format(epoch, i, len(train_dataloader), loss.item()))
        print("epoch {} mean CD {:.5f}".format(epoch, total_loss / n))


if __name__ == "__main__":
    train()
