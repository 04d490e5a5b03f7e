"""PointPillars-style 3D car detector (pillar feature net -> BEV scatter -> SECOND-like backbone
with FPN neck -> center heatmap + box regression head) trained in fp16 mixed precision as the
mmdet3d fp16 configs do: the point-cloud input is cast to half by an auto_fp16-style decorator,
the network runs under autocast(float16), and a static loss scale of 512 guards the optimizer
step (steps whose gradients overflow are skipped, as Fp16OptimizerHook does). The lidar frames
(x, y, z, intensity, elongation, as in the Waymo-converted .bin files) are synthetic.
"""
import functools
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

SEED = 3
torch.manual_seed(SEED)
np.random.seed(SEED)

point_cloud_range = [0.0, -20.0, -2.0, 40.0, 20.0, 4.0]
voxel_size = [1.25, 1.25, 6.0]
max_num_points = 20
max_voxels = 1000
grid_size = [32, 32]          # nx, ny
out_size_factor = 2
fp16 = dict(loss_scale=512.)


# ----------------------------------------------------------------------------- synthetic lidar frames
def box_surface_points(rng, cx, cy, yaw, l, w, h, n):
    """Points on the sides of a car box that face the sensor at the origin."""
    pts = []
    for _ in range(n):
        side = rng.randint(4)
        u = rng.uniform(-0.5, 0.5)
        if side < 2:
            lx, ly = u * l, (0.5 if side == 0 else -0.5) * w
        else:
            lx, ly = (0.5 if side == 2 else -0.5) * l, u * w
        z = rng.uniform(-1.7, -1.7 + h)
        x = cx + lx * math.cos(yaw) - ly * math.sin(yaw)
        y = cy + lx * math.sin(yaw) + ly * math.cos(yaw)
        pts.append((x, y, z))
    pts = np.array(pts)
    # keep the half facing the sensor
    rel = pts[:, :2] - np.array([cx, cy])
    facing = (rel * -np.array([cx, cy])).sum(1) > -0.3
    return pts[facing]


def make_frame(rng):
    n_ground = rng.randint(1800, 2600)
    r = 40.0 * np.sqrt(rng.rand(n_ground))
    th = rng.uniform(-0.5 * np.pi, 0.5 * np.pi, n_ground)
    ground = np.stack([r * np.cos(th), r * np.sin(th), -1.75 + 0.05 * rng.randn(n_ground)], 1)
    g_int = rng.gamma(2.0, 0.05, n_ground)
    parts, ints, boxes = [ground], [g_int], []
    for _ in range(rng.randint(1, 5)):
        cx, cy = rng.uniform(6, 36), rng.uniform(-16, 16)
        yaw = rng.uniform(-np.pi, np.pi)
        l, w, h = rng.uniform(3.9, 4.9), rng.uniform(1.7, 2.1), rng.uniform(1.4, 1.8)
        n = int(6000 / (cx ** 2 + cy ** 2) ** 0.5)
        pts = box_surface_points(rng, cx, cy, yaw, l, w, h, n)
        inten = rng.gamma(2.0, 0.2, len(pts))
        plate = rng.rand(len(pts)) < 0.04           # licence plate: retro-reflective
        inten[plate] = rng.uniform(200.0, 9000.0, plate.sum())
        parts.append(pts)
        ints.append(inten)
        boxes.append((cx, cy, -1.7 + h / 2, l, w, h, yaw))
    for _ in range(rng.randint(0, 3)):             # poles with traffic signs
        px, py = rng.uniform(4, 38), rng.uniform(-19, 19)
        n = 40
        pts = np.stack([px + 0.05 * rng.randn(n), py + 0.05 * rng.randn(n), rng.uniform(-1.7, 2.5, n)], 1)
        inten = rng.gamma(2.0, 0.3, n)
        sign = pts[:, 2] > 1.6
        inten[sign] = 10 ** rng.uniform(3.5, 5.3, sign.sum())
        parts.append(pts)
        ints.append(inten)
    xyz = np.concatenate(parts)
    intensity = np.concatenate(ints)
    elongation = rng.gamma(1.5, 0.1, len(xyz))
    points = np.concatenate([xyz, intensity[:, None], elongation[:, None]], 1).astype(np.float32)
    return points, np.array(boxes, dtype=np.float32)


# ----------------------------------------------------------------------------- dataset / pipeline
def voxelize(points):
    pc_range = np.array(point_cloud_range, dtype=np.float32)
    keep = np.all((points[:, :3] >= pc_range[:3]) & (points[:, :3] < pc_range[3:]), axis=1)
    points = points[keep]
    ix = ((points[:, 0] - pc_range[0]) / voxel_size[0]).astype(np.int64)
    iy = ((points[:, 1] - pc_range[1]) / voxel_size[1]).astype(np.int64)
    pid = iy * grid_size[0] + ix
    order = np.argsort(pid, kind='stable')
    points, pid = points[order], pid[order]
    uniq, first, counts = np.unique(pid, return_index=True, return_counts=True)
    uniq, first, counts = uniq[:max_voxels], first[:max_voxels], counts[:max_voxels]
    voxels = np.zeros((len(uniq), max_num_points, points.shape[1]), dtype=np.float32)
    num_points = np.minimum(counts, max_num_points)
    for k in range(max_num_points):
        has = num_points > k
        voxels[has, k] = points[first[has] + k]
    coors = np.stack([np.zeros_like(uniq), np.zeros_like(uniq), uniq // grid_size[0], uniq % grid_size[0]], 1)
    return voxels, num_points, coors


def draw_targets(boxes):
    H, W = grid_size[1] // out_size_factor, grid_size[0] // out_size_factor
    heatmap = np.zeros((1, H, W), dtype=np.float32)
    reg = np.zeros((8, H, W), dtype=np.float32)
    reg_mask = np.zeros((H, W), dtype=np.float32)
    stride = voxel_size[0] * out_size_factor
    for (cx, cy, cz, l, w, h, yaw) in boxes:
        fx, fy = (cx - point_cloud_range[0]) / stride, (cy - point_cloud_range[1]) / stride
        ix, iy = int(fx), int(fy)
        if not (0 <= ix < W and 0 <= iy < H):
            continue
        sigma = max(0.8, (w / stride) / 3)
        yy, xx = np.mgrid[0:H, 0:W]
        g = np.exp(-((xx - fx) ** 2 + (yy - fy) ** 2) / (2 * sigma ** 2))
        heatmap[0] = np.maximum(heatmap[0], g)
        heatmap[0, iy, ix] = 1.0
        reg[:, iy, ix] = [fx - ix, fy - iy, cz, np.log(l), np.log(w), np.log(h), np.sin(yaw), np.cos(yaw)]
        reg_mask[iy, ix] = 1.0
    return heatmap, reg, reg_mask


class WaymoLikeDataset(Dataset):
    """Frames as LoadPointsFromFile(load_dim=6, use_dim=5) would give them: x, y, z, intensity, elongation."""

    def __init__(self, n_frames, seed):
        rng = np.random.RandomState(seed)
        self.frames = [make_frame(rng) for _ in range(n_frames)]

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, idx):
        points, boxes = self.frames[idx]
        points = points[:, :5]
        voxels, num_points, coors = voxelize(points)
        heatmap, reg, reg_mask = draw_targets(boxes)
        return dict(voxels=torch.from_numpy(voxels), num_points=torch.from_numpy(num_points),
                    coors=torch.from_numpy(coors), heatmap=torch.from_numpy(heatmap),
                    reg=torch.from_numpy(reg), reg_mask=torch.from_numpy(reg_mask), boxes=boxes)


def collate(batch):
    coors = []
    for i, b in enumerate(batch):
        c = b['coors'].clone()
        c[:, 0] = i
        coors.append(c)
    return dict(voxels=torch.cat([b['voxels'] for b in batch]),
                num_points=torch.cat([b['num_points'] for b in batch]),
                coors=torch.cat(coors),
                heatmap=torch.stack([b['heatmap'] for b in batch]),
                reg=torch.stack([b['reg'] for b in batch]),
                reg_mask=torch.stack([b['reg_mask'] for b in batch]),
                boxes=[b['boxes'] for b in batch],
                batch_size=len(batch))


# ----------------------------------------------------------------------------- fp16 helpers (mmcv style)
def auto_fp16(apply_to=None):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, batch, *args, **kwargs):
            if getattr(self, 'fp16_enabled', False):
                batch = dict(batch)
                for name in apply_to:
                    batch[name] = batch[name].half()
            return fn(self, batch, *args, **kwargs)
        return wrapper
    return decorator


# ----------------------------------------------------------------------------- model
def get_paddings_indicator(actual_num, max_num, axis=0):
    actual_num = torch.unsqueeze(actual_num, axis + 1)
    max_num_shape = [1] * len(actual_num.shape)
    max_num_shape[axis + 1] = -1
    max_num = torch.arange(max_num, dtype=torch.int, device=actual_num.device).view(max_num_shape)
    return actual_num.int() > max_num


class PFNLayer(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.linear = nn.Linear(in_channels, out_channels, bias=False)
        self.norm = nn.BatchNorm1d(out_channels, eps=1e-3, momentum=0.01)

    def forward(self, inputs):
        x = self.linear(inputs)
        x = self.norm(x.permute(0, 2, 1).contiguous()).permute(0, 2, 1).contiguous()
        x = F.relu(x)
        return torch.max(x, dim=1, keepdim=True)[0]


class PillarFeatureNet(nn.Module):
    def __init__(self, in_channels=5, feat_channels=16):
        super().__init__()
        self.pfn_layers = nn.ModuleList([PFNLayer(in_channels + 5, feat_channels)])
        self.vx, self.vy = voxel_size[0], voxel_size[1]
        self.x_offset = self.vx / 2 + point_cloud_range[0]
        self.y_offset = self.vy / 2 + point_cloud_range[1]

    def forward(self, features, num_points, coors):
        features_ls = [features]
        points_mean = features[:, :, :3].sum(dim=1, keepdim=True) / num_points.type_as(features).view(-1, 1, 1)
        f_cluster = features[:, :, :3] - points_mean
        features_ls.append(f_cluster)
        f_center = torch.zeros_like(features[:, :, :2])
        f_center[:, :, 0] = features[:, :, 0] - (coors[:, 3].type_as(features).unsqueeze(1) * self.vx + self.x_offset)
        f_center[:, :, 1] = features[:, :, 1] - (coors[:, 2].type_as(features).unsqueeze(1) * self.vy + self.y_offset)
        features_ls.append(f_center)
        features = torch.cat(features_ls, dim=-1)
        voxel_count = features.shape[1]
        mask = get_paddings_indicator(num_points, voxel_count, axis=0)
        mask = torch.unsqueeze(mask, -1).type_as(features)
        features = features * mask
        for pfn in self.pfn_layers:
            features = pfn(features)
        return features.squeeze(1)


class PointPillarsScatter(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels
        self.nx, self.ny = grid_size

    def forward(self, voxel_features, coors, batch_size):
        batch_canvas = []
        for b in range(batch_size):
            canvas = voxel_features.new_zeros(self.in_channels, self.nx * self.ny)
            this = coors[:, 0] == b
            indices = (coors[this, 2] * self.nx + coors[this, 3]).long()
            canvas[:, indices] = voxel_features[this].t()
            batch_canvas.append(canvas)
        return torch.stack(batch_canvas, 0).view(batch_size, self.in_channels, self.ny, self.nx)


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), nn.ReLU())


class SECOND(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([conv_bn(16, 16, 2), conv_bn(16, 32, 2)])

    def forward(self, x):
        outs = []
        for blk in self.blocks:
            x = blk(x)
            outs.append(x)
        return outs


class SECONDFPN(nn.Module):
    def __init__(self):
        super().__init__()
        self.deblocks = nn.ModuleList([
            nn.Sequential(nn.ConvTranspose2d(16, 16, 1, stride=1, bias=False), nn.BatchNorm2d(16, eps=1e-3, momentum=0.01), nn.ReLU()),
            nn.Sequential(nn.ConvTranspose2d(32, 16, 2, stride=2, bias=False), nn.BatchNorm2d(16, eps=1e-3, momentum=0.01), nn.ReLU())])

    def forward(self, xs):
        return torch.cat([d(x) for d, x in zip(self.deblocks, xs)], dim=1)


class CenterHead(nn.Module):
    def __init__(self, in_channels=32):
        super().__init__()
        self.shared_conv = conv_bn(in_channels, 16)
        self.heatmap = nn.Conv2d(16, 1, 1)
        self.reg = nn.Conv2d(16, 8, 1)
        self.heatmap.bias.data.fill_(-2.19)

    def forward(self, x):
        x = self.shared_conv(x)
        return self.heatmap(x), self.reg(x)


class PointPillarsDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.fp16_enabled = False
        self.voxel_encoder = PillarFeatureNet()
        self.middle_encoder = PointPillarsScatter(16)
        self.backbone = SECOND()
        self.neck = SECONDFPN()
        self.head = CenterHead()

    @auto_fp16(apply_to=('voxels',))
    def forward(self, batch):
        voxel_features = self.voxel_encoder(batch['voxels'], batch['num_points'], batch['coors'])
        x = self.middle_encoder(voxel_features, batch['coors'], batch['batch_size'])
        x = self.neck(self.backbone(x))
        return self.head(x)


def gaussian_focal_loss(pred, target, alpha=2.0, gamma=4.0):
    eps = 1e-6
    pos_weights = target.eq(1)
    neg_weights = (1 - target).pow(gamma)
    pos_loss = -(pred + eps).log() * (1 - pred).pow(alpha) * pos_weights
    neg_loss = -(1 - pred + eps).log() * pred.pow(alpha) * neg_weights
    return (pos_loss + neg_loss).sum() / max(pos_weights.sum().item(), 1)


def compute_loss(outputs, batch):
    hm_logits, reg = outputs
    hm = torch.clamp(hm_logits.float().sigmoid(), 1e-4, 1 - 1e-4)
    loss_hm = gaussian_focal_loss(hm, batch['heatmap'])
    mask = batch['reg_mask'].unsqueeze(1)
    loss_reg = (F.l1_loss(reg.float(), batch['reg'], reduction='none') * mask).sum() / max(mask.sum().item(), 1)
    return loss_hm, 0.25 * loss_reg


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses = []
    for batch in loader:
        loss_hm, loss_reg = compute_loss(model(batch), batch)
        losses.append((loss_hm + loss_reg).item())
    model.train()
    return float(np.mean(losses))


def main():
    train_set = WaymoLikeDataset(48, seed=11)
    val_set = WaymoLikeDataset(8, seed=12)
    train_loader = DataLoader(train_set, batch_size=2, shuffle=True, collate_fn=collate)
    val_loader = DataLoader(val_set, batch_size=4, shuffle=False, collate_fn=collate)

    model = PointPillarsDetector()
    model.fp16_enabled = fp16 is not None
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    loss_scale = fp16['loss_scale']

    it = 0
    for epoch in range(2):
        for batch in train_loader:
            it += 1
            with torch.autocast(device_type='cpu', dtype=torch.float16, enabled=model.fp16_enabled):
                outputs = model(batch)
            loss_hm, loss_reg = compute_loss(outputs, batch)
            loss = loss_hm + loss_reg
            optimizer.zero_grad()
            (loss * loss_scale).backward()
            # Fp16OptimizerHook: unscale, skip the step if any gradient overflowed
            overflow = False
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.div_(loss_scale)
                    if not torch.isfinite(p.grad).all():
                        overflow = True
            if not overflow:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
                optimizer.step()
            if it % 4 == 0 or overflow:
                print('Epoch [%d][%d]  loss_heatmap: %.4f, loss_bbox: %.4f, loss: %.4f%s'
                      % (epoch + 1, it, loss_hm.item(), loss_reg.item(), loss.item(),
                         '  (Check overflow, skip this iteration)' if overflow else ''), flush=True)
        with torch.autocast(device_type='cpu', dtype=torch.float16, enabled=model.fp16_enabled):
            val_loss = evaluate(model, val_loader)
        print('Epoch %d val: loss %.4f' % (epoch + 1, val_loss), flush=True)


if __name__ == '__main__':
    main()
