"""Relative camera pose regression between two views (CamNet-style pose head).

A shared convolutional backbone embeds both views; their feature maps are concatenated along
the channels and a head of 1x1 convolutions regresses the relative translation (3 values) and
the relative rotation as a unit quaternion (4 values), trained with an L1 loss on both.
The views are synthetic: a random textured scene rendered twice, the second view shifted,
zoomed and rotated about the optical axis.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

IMG = 32
BATCH_SIZE = 16
EPOCHS = 4
BASE_LR = 1e-2


def render_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 64), torch.linspace(-1, 1, 64), indexing="ij")
    scene = torch.zeros(n, 1, 64, 64)
    for k in range(3):
        cx, cy = (torch.rand(2, n, 1, 1, generator=g) - 0.5) * 0.8
        ax, ay = 0.04 + 0.06 * torch.rand(2, n, 1, 1, generator=g) * torch.tensor([1.0, 0.2]).view(2, 1, 1, 1)
        ang = torch.rand(n, 1, 1, generator=g) * math.pi
        u = (xx - cx) * torch.cos(ang) + (yy - cy) * torch.sin(ang)
        v = -(xx - cx) * torch.sin(ang) + (yy - cy) * torch.cos(ang)
        scene[:, 0] += (k + 1) * torch.exp(-u ** 2 / ax - v ** 2 / ay)
    tx = (torch.rand(n, generator=g) - 0.5) * 0.5
    ty = (torch.rand(n, generator=g) - 0.5) * 0.5
    log_s = (torch.rand(n, generator=g) - 0.5) * 0.4
    theta = (torch.rand(n, generator=g) - 0.5) * (math.pi / 3)
    ident = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]]).expand(n, 2, 3)
    grid1 = F.affine_grid(ident, (n, 1, IMG, IMG), align_corners=False)
    s = torch.exp(log_s) * 0.5
    A = torch.stack([
        torch.stack([s * torch.cos(theta), -s * torch.sin(theta), tx], 1),
        torch.stack([s * torch.sin(theta), s * torch.cos(theta), ty], 1)], 1)
    grid2 = F.affine_grid(A, (n, 1, IMG, IMG), align_corners=False)
    view1 = F.grid_sample(scene, grid1, align_corners=False)
    view2 = F.grid_sample(scene, grid2, align_corners=False)
    translation = torch.stack([tx * 4, ty * 4, log_s * 5], 1)
    quaternions = torch.stack([torch.cos(theta / 2), torch.zeros(n), torch.zeros(n), torch.sin(theta / 2)], 1)
    return view1, view2, translation, quaternions


class PosePairs(Dataset):
    def __init__(self, n, seed):
        self.view1, self.view2, self.translation, self.quaternions = render_pairs(n, seed)

    def __len__(self):
        return len(self.view1)

    def __getitem__(self, i):
        return self.view1[i], self.view2[i], self.translation[i], self.quaternions[i]


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.layers(x)


class PoseHead(nn.Module):
    def __init__(self, in_ch=128):
        super().__init__()
        self.fuse = nn.Sequential(
            nn.Conv2d(in_ch, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 128, kernel_size=2), nn.BatchNorm2d(128), nn.ReLU(inplace=True))
        self.cls_trans = nn.Sequential(
            nn.Conv2d(128, 128, kernel_size=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 3, kernel_size=1))
        self.cls_quat = nn.Sequential(
            nn.Conv2d(128, 128, kernel_size=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 4, kernel_size=1))

    def forward(self, x):
        x = self.fuse(x)
        return self.cls_trans(x), self.cls_quat(x)


train_loader = DataLoader(PosePairs(800, seed=1), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)
val_set = PosePairs(200, seed=2)

model = Backbone()
model_ppm = PoseHead()
optimizer = torch.optim.SGD([
    {'params': model.parameters()},
    {'params': model_ppm.parameters(), 'lr': BASE_LR * 10},
], lr=BASE_LR, momentum=0.9, weight_decay=1e-4)
criterion = nn.L1Loss()


def validate():
    model.eval()
    model_ppm.eval()
    with torch.no_grad():
        trans, quat = model_ppm(torch.cat([model(val_set.view1), model(val_set.view2)], 1))
        trans, quat = trans.flatten(1), quat.flatten(1)
        t_err = (trans - val_set.translation).abs().mean().item()
        r_err = (quat - val_set.quaternions).abs().mean().item()
        spread = trans.std(0).mean().item()
    model.train()
    model_ppm.train()
    return t_err, r_err, spread


t0 = time.time()
for epoch in range(1, EPOCHS + 1):
    t_sum, r_sum, n = 0.0, 0.0, 0
    for input1, input2, translation, quaternions in train_loader:
        x1 = model(input1)
        x2 = model(input2)
        trans, quat = model_ppm(torch.cat([x1, x2], 1))

        t_loss = criterion(trans, translation)
        r_loss = criterion(quat, quaternions)
        loss = r_loss + t_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        t_sum += t_loss.item()
        r_sum += r_loss.item()
        n += 1
    t_err, r_err, spread = validate()
    print("Epoch [{}/{}] tLoss {:.4f} rLoss {:.4f} | val trans L1 {:.4f} quat L1 {:.4f} pred spread {:.4f} ({:.1f}s)".format(
        epoch, EPOCHS, t_sum / n, r_sum / n, t_err, r_err, spread, time.time() - t0))
