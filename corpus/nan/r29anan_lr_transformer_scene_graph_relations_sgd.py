"""Relation head for weakly supervised scene graphs: a small transformer encoder over the
detected objects of an image (region feature + box), then a pairwise predicate classifier
(subject, object) -> one of the predicate classes. SGD with momentum, constant rate."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

NUM_OBJ = 8
FEAT_DIM = 64
NUM_PRED = 12
HIDDEN = 128
BASE_LR = 0.5
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
BATCH_SIZE = 16
EPOCHS = 6


class SceneGraphPairs(Dataset):
    def __init__(self, n_images, proto, pred_w):
        g = torch.Generator().manual_seed(n_images)
        self.feats = torch.randn(n_images, NUM_OBJ, FEAT_DIM, generator=g)
        xy = torch.rand(n_images, NUM_OBJ, 2, generator=g)
        wh = 0.05 + 0.4 * torch.rand(n_images, NUM_OBJ, 2, generator=g)
        self.boxes = torch.cat([xy, xy + wh], dim=-1)
        cls = torch.randint(0, proto.size(0), (n_images, NUM_OBJ), generator=g)
        self.feats = self.feats + 2.0 * proto[cls]
        pair_in = torch.cat([proto[cls].unsqueeze(2).expand(-1, -1, NUM_OBJ, -1),
                             proto[cls].unsqueeze(1).expand(-1, NUM_OBJ, -1, -1),
                             (xy.unsqueeze(2) - xy.unsqueeze(1))], dim=-1)
        self.rels = (pair_in @ pred_w).argmax(-1)

    def __len__(self):
        return self.feats.size(0)

    def __getitem__(self, i):
        return self.feats[i], self.boxes[i], self.rels[i]


class RelationTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.obj_proj = nn.Linear(FEAT_DIM, HIDDEN)
        self.box_proj = nn.Linear(4, HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, nhead=4, dim_feedforward=4 * HIDDEN,
                                           dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=3)
        self.sub_proj = nn.Linear(HIDDEN, HIDDEN)
        self.obj_proj2 = nn.Linear(HIDDEN, HIDDEN)
        self.rel_cls = nn.Linear(HIDDEN, NUM_PRED)

    def forward(self, feats, boxes):
        x = self.obj_proj(feats) + self.box_proj(boxes)
        x = self.encoder(x)
        s = self.sub_proj(x).unsqueeze(2)
        o = self.obj_proj2(x).unsqueeze(1)
        return self.rel_cls(F.relu(s * o))


proto = torch.randn(20, FEAT_DIM)
pred_w = torch.randn(2 * FEAT_DIM + 2, NUM_PRED)
train_loader = DataLoader(SceneGraphPairs(512, proto, pred_w), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(SceneGraphPairs(128, proto, pred_w), batch_size=64)

model = RelationTransformer()
optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=MOMENTUM,
                            weight_decay=WEIGHT_DECAY)

step = 0
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for feats, boxes, rels in train_loader:
        logits = model(feats, boxes)
        loss_rel = F.cross_entropy(logits.reshape(-1, NUM_PRED), rels.reshape(-1))
        optimizer.zero_grad()
        loss_rel.backward()
        optimizer.step()
        total += loss_rel.item()
        step += 1
        if step % 20 == 0:
            print(f"iter {step}  loss_rel {loss_rel.item():.4f}  lr {optimizer.param_groups[0]['lr']}")
    model.eval()
    correct = count = 0
    with torch.no_grad():
        for feats, boxes, rels in val_loader:
            pred = model(feats, boxes).argmax(-1)
            correct += (pred == rels).sum().item()
            count += rels.numel()
    print(f"epoch {epoch}  train loss_rel {total / len(train_loader):.4f}  val predicate acc {correct / count:.4f}")
