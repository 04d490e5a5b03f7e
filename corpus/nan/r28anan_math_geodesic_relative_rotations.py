"""Multi-view camera rotation regression with the 6D (ortho6d) rotation representation.

Each scene is seen from V cameras; for every view the network sees the scene's landmarks in
camera coordinates and regresses the camera rotation.  Absolute rotations are only defined up to
a global frame, so the loss is the geodesic distance between predicted and true *relative*
rotations R_i R_j^T over all view pairs of a scene.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_SCENES = 768
VIEWS = 6
N_LANDMARKS = 12
BATCH = 16
EPOCHS = 4
LR = 1e-3


def normalize_vector(v):
    v_mag = torch.sqrt(v.pow(2).sum(1, keepdim=True))
    v_mag = torch.clamp(v_mag, min=1e-8)
    return v / v_mag


def cross_product(u, v):
    i = u[:, 1] * v[:, 2] - u[:, 2] * v[:, 1]
    j = u[:, 2] * v[:, 0] - u[:, 0] * v[:, 2]
    k = u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]
    return torch.stack((i, j, k), 1)


def compute_rotation_matrix_from_ortho6d(ortho6d):
    x_raw = ortho6d[:, 0:3]
    y_raw = ortho6d[:, 3:6]
    x = normalize_vector(x_raw)
    z = normalize_vector(cross_product(x, y_raw))
    y = cross_product(z, x)
    return torch.stack((x, y, z), 2)


def compute_rotation_matrix_from_quaternion(q):
    q = normalize_vector(q)
    qw, qx, qy, qz = q[:, 0:1], q[:, 1:2], q[:, 2:3], q[:, 3:4]
    row0 = torch.cat((1 - 2 * qy * qy - 2 * qz * qz, 2 * qx * qy - 2 * qz * qw, 2 * qx * qz + 2 * qy * qw), 1)
    row1 = torch.cat((2 * qx * qy + 2 * qz * qw, 1 - 2 * qx * qx - 2 * qz * qz, 2 * qy * qz - 2 * qx * qw), 1)
    row2 = torch.cat((2 * qx * qz - 2 * qy * qw, 2 * qy * qz + 2 * qx * qw, 1 - 2 * qx * qx - 2 * qy * qy), 1)
    return torch.stack((row0, row1, row2), 1)


def compute_geodesic_distance_from_two_matrices(m1, m2):
    m = torch.bmm(m1, m2.transpose(1, 2))
    cos = (m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2] - 1) / 2
    cos = torch.min(cos, torch.ones_like(cos))
    cos = torch.max(cos, -torch.ones_like(cos))
    theta = torch.acos(cos)
    return theta


class MultiViewScenes(Dataset):
    def __init__(self, n):
        self.landmarks = torch.randn(n, N_LANDMARKS, 3)
        quat = torch.randn(n * VIEWS, 4)
        self.rotations = compute_rotation_matrix_from_quaternion(quat).view(n, VIEWS, 3, 3)

    def __len__(self):
        return len(self.landmarks)

    def __getitem__(self, idx):
        pts = self.landmarks[idx]
        rots = self.rotations[idx]
        # landmarks seen from each camera, with a little detection noise
        obs = torch.einsum("vab,nb->vna", rots, pts) + 0.01 * torch.randn(VIEWS, N_LANDMARKS, 3)
        canon = pts.reshape(-1)
        return obs.reshape(VIEWS, -1), canon, rots


class RotationRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        d = N_LANDMARKS * 3
        self.net = nn.Sequential(
            nn.Linear(2 * d, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 6),
        )

    def forward(self, obs, canon):
        b, v, d = obs.shape
        x = torch.cat([obs, canon[:, None].expand(b, v, d)], -1)
        out = self.net(x.reshape(b * v, -1))
        return compute_rotation_matrix_from_ortho6d(out).view(b, v, 3, 3)


def relative_rotations(r):
    # r: (B, V, 3, 3) -> R_i R_j^T for every view pair: (B*V*V, 3, 3)
    rel = r[:, :, None] @ r[:, None].transpose(-1, -2)
    return rel.reshape(-1, 3, 3)


def main():
    train_set = MultiViewScenes(N_SCENES)
    val_set = MultiViewScenes(128)
    train_loader = DataLoader(train_set, batch_size=BATCH, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)

    model = RotationRegressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        running = 0.0
        for obs, canon, rots in train_loader:
            pred = model(obs, canon)
            theta = compute_geodesic_distance_from_two_matrices(relative_rotations(pred), relative_rotations(rots))
            loss = theta.mean()

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            running += loss.item()
            step += 1
            if step % 12 == 0:
                print(f"epoch {epoch} step {step} geodesic loss {loss.item():.4f} rad")

        model.eval()
        errs = []
        with torch.no_grad():
            for obs, canon, rots in val_loader:
                pred = model(obs, canon)
                theta = compute_geodesic_distance_from_two_matrices(relative_rotations(pred), relative_rotations(rots))
                errs.append(theta)
        val_deg = torch.cat(errs).mean().item() * 180 / math.pi
        print(f"epoch {epoch} train_loss {running / len(train_loader):.4f} val_mean_rel_err {val_deg:.2f} deg")


if __name__ == "__main__":
    main()
