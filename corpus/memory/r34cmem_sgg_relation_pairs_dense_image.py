"""Scene-graph relation head: predict a predicate for every (subject, object) pair of the
annotated boxes of an image (boxes + classes from the detector annotations), trained with
cross-entropy over all pairs, background predicate 0 for unrelated pairs.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

NUM_OBJ_CLASSES = 20
PREDICATES = ["__background__", "left of", "right of", "above", "below"]
FEAT_DIM = 128


def make_image(g, num_objects):
    xy = torch.rand(num_objects, 2, generator=g)
    wh = 0.02 + 0.08 * torch.rand(num_objects, 2, generator=g)
    boxes = torch.cat([xy - wh / 2, xy + wh / 2], dim=1).clamp(0, 1)
    labels = torch.randint(0, NUM_OBJ_CLASSES, (num_objects,), generator=g)
    return boxes, labels


def relation_targets(boxes):
    c = (boxes[:, :2] + boxes[:, 2:]) / 2
    d = c[None, :, :] - c[:, None, :]
    near = d.norm(dim=-1) < 0.25
    horiz = d[..., 0].abs() > d[..., 1].abs()
    rel = torch.where(horiz, torch.where(d[..., 0] > 0, 1, 2), torch.where(d[..., 1] > 0, 4, 3))
    rel = torch.where(near, rel, torch.zeros_like(rel))
    rel.fill_diagonal_(0)
    return rel


class SceneGraphDataset(Dataset):
    """Annotated images: most have a handful of boxes, a few crowded scenes (harbours full of
    boats) carry hundreds of annotations."""

    def __init__(self, n_images, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = []
        for i in range(n_images):
            m = int(torch.randint(4, 24, (1,), generator=g))
            if i in (37, 51):
                m = 640
            self.images.append(make_image(g, m))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        boxes, labels = self.images[idx]
        return boxes, labels, relation_targets(boxes)


class RelationHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_embed = nn.Embedding(NUM_OBJ_CLASSES, 32)
        self.obj_encoder = nn.Sequential(nn.Linear(4 + 32, FEAT_DIM), nn.ReLU(), nn.Linear(FEAT_DIM, FEAT_DIM))
        self.pair_mlp = nn.Sequential(nn.Linear(2 * FEAT_DIM + 4, 256), nn.ReLU(), nn.Linear(256, len(PREDICATES)))

    def forward(self, boxes, labels):
        feats = self.obj_encoder(torch.cat([boxes, self.cls_embed(labels)], dim=1))
        m = feats.size(0)
        rel_pair_idx = torch.cartesian_prod(torch.arange(m), torch.arange(m))
        sub, obj = rel_pair_idx[:, 0], rel_pair_idx[:, 1]
        centers = (boxes[:, :2] + boxes[:, 2:]) / 2
        geo = torch.cat([centers[obj] - centers[sub], boxes[obj, 2:] - boxes[obj, :2]], dim=1)
        pair_feats = torch.cat([feats[sub], feats[obj], geo], dim=1)
        return self.pair_mlp(pair_feats), rel_pair_idx


train_set = SceneGraphDataset(64, seed=1)
loader = DataLoader(train_set, batch_size=None, shuffle=False)
model = RelationHead()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
class_weight = torch.tensor([0.05, 1.0, 1.0, 1.0, 1.0])

for epoch in range(4):
    running, correct, total = 0.0, 0, 0
    for it, (boxes, labels, rel_targets) in enumerate(loader):
        rel_logits, rel_pair_idx = model(boxes, labels)
        target = rel_targets[rel_pair_idx[:, 0], rel_pair_idx[:, 1]]
        loss = F.cross_entropy(rel_logits, target, weight=class_weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        fg = target > 0
        correct += (rel_logits.argmax(1)[fg] == target[fg]).sum().item()
        total += fg.sum().item()
        if it % 16 == 0:
            print(f"epoch {epoch} iter {it}: {boxes.size(0)} boxes, {len(rel_pair_idx)} pairs, loss {loss.item():.4f}")
    print(f"epoch {epoch}: mean loss {running / len(loader):.4f}  predicate recall {correct / max(total, 1):.3f}")
