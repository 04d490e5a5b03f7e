"""3D instance segmentation of indoor scans, ISBNet-style: a point backbone with a semantic
head and a centroid-offset head, and an instance branch that runs on the points predicted
as objects (the background-filtered candidates). Trained on synthetic room scans.
"""
import time
import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

CLASSES = ['floor', 'wall', 'chair', 'table', 'sofa', 'bookshelf']
LABEL_SHIFT = 2                      # floor / wall are "stuff", no instances
N_POINTS = 1024

cfg = dict(epochs=2, batch_size=1, lr=2e-3, filter_bg_thresh=0.1, min_candidates=100, embed_dim=16)

OBJ_SIZE = {2: (0.5, 0.5, 0.9), 3: (1.2, 0.8, 0.75), 4: (1.8, 0.9, 0.8), 5: (1.0, 0.4, 1.9)}
OBJ_RGB = {2: (0.8, 0.3, 0.2), 3: (0.55, 0.35, 0.15), 4: (0.2, 0.3, 0.7), 5: (0.4, 0.6, 0.3)}


def make_scene(rng):
    n_obj = rng.choice([0, 1, 2, 3, 4], p=[0.06, 0.1, 0.24, 0.3, 0.3])
    pts, rgb, sem, inst = [], [], [], []
    n_obj_pts = rng.randint(120, 240, size=n_obj)
    n_stuff = N_POINTS - int(n_obj_pts.sum())
    n_floor = n_stuff // 2
    floor = np.c_[rng.uniform(0, 5, (n_floor, 2)), rng.normal(0, 0.01, n_floor)]
    pts.append(floor); rgb.append(np.tile((0.6, 0.5, 0.4), (n_floor, 1))); sem += [0] * n_floor; inst += [-100] * n_floor
    n_wall = n_stuff - n_floor
    side = rng.randint(0, 2, n_wall)
    along = rng.uniform(0, 5, n_wall)
    wall = np.c_[np.where(side == 0, 0.0, along), np.where(side == 0, along, 0.0), rng.uniform(0, 2.5, n_wall)]
    pts.append(wall); rgb.append(np.tile((0.9, 0.9, 0.88), (n_wall, 1))); sem += [1] * n_wall; inst += [-100] * n_wall
    for k in range(n_obj):
        cls = rng.randint(2, 6)
        sx, sy, sz = OBJ_SIZE[cls]
        cx, cy = rng.uniform(0.8, 4.2, 2)
        m = n_obj_pts[k]
        p = np.c_[cx + rng.uniform(-sx / 2, sx / 2, m), cy + rng.uniform(-sy / 2, sy / 2, m), rng.uniform(0.05, sz, m)]
        pts.append(p); rgb.append(np.tile(OBJ_RGB[cls], (m, 1))); sem += [cls] * m; inst += [k] * m
    xyz = np.concatenate(pts).astype(np.float32)
    color = (np.concatenate(rgb) + rng.normal(0, 0.05, (N_POINTS, 3))).astype(np.float32)
    return xyz, color, np.array(sem), np.array(inst)


class ScanNetLike(Dataset):
    def __init__(self, n_scenes, seed):
        rng = np.random.RandomState(seed)
        self.scenes = [make_scene(rng) for _ in range(n_scenes)]

    def __len__(self):
        return len(self.scenes)

    def __getitem__(self, i):
        return self.scenes[i]


def collate_fn(batch):
    coords, feats, sems, insts, batch_idxs = [], [], [], [], []
    inst_offset = 0
    for b, (xyz, rgb, sem, inst) in enumerate(batch):
        coords.append(torch.from_numpy(xyz))
        feats.append(torch.from_numpy(rgb))
        sems.append(torch.from_numpy(sem))
        inst = torch.from_numpy(inst)
        insts.append(torch.where(inst >= 0, inst + inst_offset, inst))
        inst_offset += int(inst.max().clamp(min=-1)) + 1
        batch_idxs.append(torch.full((len(xyz),), b, dtype=torch.long))
    return dict(coords_float=torch.cat(coords), feats=torch.cat(feats), semantic_labels=torch.cat(sems),
                instance_labels=torch.cat(insts), batch_idxs=torch.cat(batch_idxs), batch_size=len(batch))


class AverageMeter:
    def __init__(self):
        self.val, self.avg, self.sum, self.count = 0, 0, 0, 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def centroids_of(coords, instance_labels):
    offsets = torch.zeros_like(coords)
    for k in instance_labels.unique():
        if k < 0:
            continue
        m = instance_labels == k
        offsets[m] = coords[m].mean(0) - coords[m]
    return offsets


class ISBNet(nn.Module):
    def __init__(self, in_channels=6, media=64, num_classes=len(CLASSES)):
        super().__init__()
        self.input_conv = nn.Sequential(nn.Linear(in_channels, media), nn.ReLU(), nn.Linear(media, media), nn.ReLU())
        self.fuse = nn.Sequential(nn.Linear(2 * media, media), nn.ReLU())
        self.semantic_linear = nn.Linear(media, num_classes)
        self.offset_linear = nn.Linear(media, 3)
        self.embed_linear = nn.Sequential(nn.Linear(media + 3, media), nn.ReLU(), nn.Linear(media, cfg['embed_dim']))

    def forward_backbone(self, coords_float, feats, batch_idxs, batch_size):
        x = self.input_conv(torch.cat([coords_float / 2.5 - 1.0, (feats - 0.5) * 4.0], 1))
        glob = torch.stack([x[batch_idxs == b].max(0)[0] for b in range(batch_size)])
        return self.fuse(torch.cat([x, glob[batch_idxs]], 1))

    def parse_losses(self, losses):
        loss = sum(v for v in losses.values())
        losses["loss"] = loss
        for loss_name, loss_value in losses.items():
            losses[loss_name] = loss_value.item()
        return loss, losses

    def forward(self, batch, return_loss=True, epoch=0):
        coords_float, semantic_labels = batch['coords_float'], batch['semantic_labels']
        instance_labels, batch_idxs = batch['instance_labels'], batch['batch_idxs']
        feats = self.forward_backbone(coords_float, batch['feats'], batch_idxs, batch['batch_size'])
        semantic_scores = self.semantic_linear(feats)
        centroid_offset = self.offset_linear(feats)

        semantic_scores_sm = F.softmax(semantic_scores, dim=1)
        object_conditions = torch.any(semantic_scores_sm[:, LABEL_SHIFT:] >= cfg['filter_bg_thresh'], dim=-1)
        object_idxs = torch.nonzero(object_conditions).view(-1)

        if len(object_idxs) <= cfg['min_candidates']:
            loss_dict = {"placeholder": torch.tensor(0.0, requires_grad=True, dtype=torch.float)}
            return self.parse_losses(loss_dict)

        losses = {}
        losses["sem_loss"] = F.cross_entropy(semantic_scores, semantic_labels)
        fg = instance_labels >= 0
        offset_labels = centroids_of(coords_float, instance_labels)
        losses["offset_loss"] = F.l1_loss(centroid_offset[fg], offset_labels[fg]) if fg.any() else 0 * centroid_offset.sum()

        cand_inst = instance_labels[object_idxs]
        emb = self.embed_linear(torch.cat([feats[object_idxs], coords_float[object_idxs] + centroid_offset[object_idxs]], 1))
        keep = cand_inst >= 0
        emb, cand_inst = emb[keep], cand_inst[keep]
        pull, means = [], []
        for k in cand_inst.unique():
            e = emb[cand_inst == k]
            mu = e.mean(0)
            means.append(mu)
            pull.append(F.relu((e - mu).norm(dim=1) - 0.1).pow(2).mean())
        if len(means) > 1:
            means = torch.stack(means)
            dist = torch.cdist(means, means) + torch.eye(len(means)) * 10.0
            push = F.relu(1.5 - dist).pow(2).mean()
        else:
            push = 0 * emb.sum()
        losses["inst_loss"] = (torch.stack(pull).mean() if pull else 0 * emb.sum()) + push
        return self.parse_losses(losses)


def train(epoch, model, optimizer, train_loader, step):
    model.train()
    iter_time = AverageMeter()
    meter_dict = {}
    end = time.time()
    for i, batch in enumerate(train_loader, start=1):
        loss, log_vars = model(batch, return_loss=True, epoch=epoch - 1)

        # meter_dict
        for k, v in log_vars.items():
            if k not in meter_dict.keys() and k != "placeholder":
                meter_dict[k] = AverageMeter()
            meter_dict[k].update(v)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1

        iter_time.update(time.time() - end)
        end = time.time()
        remain_iter = len(train_loader) * (cfg['epochs'] - epoch + 1) - i
        remain_time = str(datetime.timedelta(seconds=int(remain_iter * iter_time.avg)))
        if i % 10 == 0:
            log_str = f"Epoch [{epoch}/{cfg['epochs']}][{i}/{len(train_loader)}]  lr: {optimizer.param_groups[0]['lr']:.2g}, eta: {remain_time}"
            for k, v in meter_dict.items():
                log_str += f", {k}: {v.val:.4f}"
            print(log_str)
    return step


def validate(epoch, model, val_loader):
    model.eval()
    correct, total, inter, union = 0, 0, 0, 0
    with torch.no_grad():
        for batch in val_loader:
            feats = model.forward_backbone(batch['coords_float'], batch['feats'], batch['batch_idxs'], batch['batch_size'])
            pred = model.semantic_linear(feats).argmax(1)
            labels = batch['semantic_labels']
            correct += (pred == labels).sum().item()
            total += len(labels)
            inter += ((pred >= LABEL_SHIFT) & (labels >= LABEL_SHIFT)).sum().item()
            union += ((pred >= LABEL_SHIFT) | (labels >= LABEL_SHIFT)).sum().item()
    print(f"Epoch [{epoch}/{cfg['epochs']}] validation: point acc {correct / total:.3f}, foreground IoU {inter / max(union, 1):.3f}")


train_loader = DataLoader(ScanNetLike(120, seed=1), batch_size=cfg['batch_size'], shuffle=True, collate_fn=collate_fn)
val_loader = DataLoader(ScanNetLike(20, seed=2), batch_size=4, shuffle=False, collate_fn=collate_fn)

model = ISBNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg['lr'], weight_decay=1e-4)

step = 0
for epoch in range(1, cfg['epochs'] + 1):
    step = train(epoch, model, optimizer, train_loader, step)
    validate(epoch, model, val_loader)
