"""iNeRF: estimate a camera pose by inverting a NeRF.

A NeRF of the scene (positional encoding + MLP) is kept fixed; the camera pose is parameterised
as a 6-vector twist (rotation + translation) applied to the initial pose estimate and optimised
with Adam so that the colours rendered along a random batch of rays match the observed image.
"""
import math
import time

import torch
import torch.nn as nn

torch.manual_seed(0)

H, W, FOCAL = 64, 64, 72.0
NEAR, FAR = 2.0, 6.0
N_SAMPLES = 192
n_rays = 1024
lrate = 0.01
n_iters = 15


def positional_encoding(x, n_freqs=10):
    out = [x]
    for i in range(n_freqs):
        out.append(torch.sin((2.0 ** i) * x))
        out.append(torch.cos((2.0 ** i) * x))
    return torch.cat(out, dim=-1)


class NeRF(nn.Module):
    def __init__(self, width=32, depth=3):
        super().__init__()
        layers, d = [], 63
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.pts_linears = nn.Sequential(*layers)
        self.alpha_linear = nn.Linear(width, 1)
        self.rgb_linear = nn.Linear(width + 27, 3)
        nn.init.constant_(self.alpha_linear.bias, 2.0)

    def forward(self, pts, viewdirs):
        h = self.pts_linears(positional_encoding(pts))
        sigma = self.alpha_linear(h)
        rgb = self.rgb_linear(torch.cat([h, positional_encoding(viewdirs, 4)], dim=-1))
        return torch.cat([rgb, sigma], dim=-1)


def skew(v):
    z = torch.zeros((), dtype=v.dtype)
    return torch.stack([torch.stack([z, -v[2], v[1]]),
                        torch.stack([v[2], z, -v[0]]),
                        torch.stack([-v[1], v[0], z])])


def twist_to_matrix(xi):
    w, v = xi[:3], xi[3:]
    theta = w.norm() + 1e-8
    K = skew(w / theta)
    R = torch.eye(3) + torch.sin(theta) * K + (1 - torch.cos(theta)) * (K @ K)
    top = torch.cat([R, v[:, None]], dim=1)
    return torch.cat([top, torch.tensor([[0.0, 0.0, 0.0, 1.0]])], dim=0)


def pose_spherical(theta, phi, radius):
    t = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, radius], [0, 0, 0, 1]], dtype=torch.float32)
    p = torch.tensor([[1, 0, 0, 0], [0, math.cos(phi), -math.sin(phi), 0],
                      [0, math.sin(phi), math.cos(phi), 0], [0, 0, 0, 1]], dtype=torch.float32)
    th = torch.tensor([[math.cos(theta), 0, -math.sin(theta), 0], [0, 1, 0, 0],
                       [math.sin(theta), 0, math.cos(theta), 0], [0, 0, 0, 1]], dtype=torch.float32)
    return th @ p @ t


def get_rays(c2w, pix):
    i, j = pix[:, 1].float(), pix[:, 0].float()
    dirs = torch.stack([(i - W * 0.5) / FOCAL, -(j - H * 0.5) / FOCAL, -torch.ones_like(i)], -1)
    rays_d = dirs @ c2w[:3, :3].T
    rays_o = c2w[:3, 3].expand(rays_d.shape)
    return rays_o, rays_d


def render_rays(model, rays_o, rays_d):
    t_vals = torch.linspace(NEAR, FAR, N_SAMPLES)
    pts = rays_o[:, None, :] + rays_d[:, None, :] * t_vals[None, :, None]
    viewdirs = rays_d / rays_d.norm(dim=-1, keepdim=True)
    raw = model(pts, viewdirs[:, None, :].expand(pts.shape))
    rgb = torch.sigmoid(raw[..., :3])
    sigma = torch.relu(raw[..., 3])
    delta = torch.cat([t_vals[1:] - t_vals[:-1], torch.tensor([1e10])])
    alpha = 1.0 - torch.exp(-sigma * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    weights = alpha * trans
    return (weights[..., None] * rgb).sum(-2)


def main():
    model = NeRF()
    for p in model.parameters():
        p.requires_grad_(False)
    all_pix = torch.stack(torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij"), -1).reshape(-1, 2)

    gt_pose = pose_spherical(0.4, -0.5, 4.0)
    with torch.no_grad():
        obs = torch.cat([render_rays(model, *get_rays(gt_pose, all_pix[k:k + 512]))
                         for k in range(0, H * W, 512)])

    start_pose = twist_to_matrix(torch.tensor([0.04, -0.06, 0.03, 0.1, -0.08, 0.05])) @ gt_pose
    cam_xi = torch.zeros(6, requires_grad=True)
    optimizer = torch.optim.Adam([cam_xi], lr=lrate, betas=(0.9, 0.999))

    for k in range(n_iters):
        t0 = time.time()
        idx = torch.randperm(H * W)[:n_rays]
        pose = twist_to_matrix(cam_xi) @ start_pose
        rays_o, rays_d = get_rays(pose, all_pix[idx])
        rgb = render_rays(model, rays_o, rays_d)
        loss = ((rgb - obs[idx]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if k % 4 == 0 or k == n_iters - 1:
            with torch.no_grad():
                err = (pose - gt_pose)
                rot_err = err[:3, :3].norm().item()
                trans_err = err[:3, 3].norm().item()
            print(f"step {k:3d} loss {loss.item():.6f} rot err {rot_err:.4f} trans err {trans_err:.4f} "
                  f"({time.time() - t0:.2f}s)")


if __name__ == "__main__":
    main()
