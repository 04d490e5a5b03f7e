"""SwAV self-supervised pretraining on synthetic feature vectors, evaluated with a kNN probe.

Loop after facebookresearch/swav main_swav.py: the prototypes are re-normalised in place at the
start of every iteration, codes come from a Sinkhorn-Knopp normalisation computed without
gradient, each view's code is predicted from the other views (swapped prediction), the prototype
gradients are dropped for the first iterations, and the learning rate follows a per-iteration
warmup + cosine schedule.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

EPOCHS = 14
BATCH_SIZE = 128
BASE_LR = 0.1
FINAL_LR = 0.003
WARMUP_EPOCHS = 1
START_WARMUP = 0.0
WD = 1e-5
NMB_PROTOTYPES = 30
FEAT_DIM = 16
HIDDEN = 128
TEMPERATURE = 0.1
EPSILON = 0.05
SINKHORN_ITERATIONS = 3
FREEZE_PROTOTYPES_NITERS = 40
NMB_CROPS = [2]
CROPS_FOR_ASSIGN = [0, 1]

IN_DIM, SIG_DIM, N_CLASSES = 32, 8, 8
_g = torch.Generator().manual_seed(1)
_basis, _ = torch.linalg.qr(torch.randn(IN_DIM, IN_DIM, generator=_g))
SIGNAL_BASIS, NUISANCE_BASIS = _basis[:, :SIG_DIM], _basis[:, SIG_DIM:]
CENTERS = 1.2 * torch.randn(N_CLASSES, SIG_DIM, generator=_g)


def make_points(n):
    y = torch.randint(0, N_CLASSES, (n,))
    sig = CENTERS[y] + 0.35 * torch.randn(n, SIG_DIM)
    nui = 1.2 * torch.randn(n, IN_DIM - SIG_DIM)
    return sig @ SIGNAL_BASIS.T + nui @ NUISANCE_BASIS.T, y


class MultiViewDataset(Dataset):
    """Returns len(NMB_CROPS) random 'augmentations' of a point: nuisance jitter + feature dropout."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def augment(self, v):
        v = v + (1.5 * torch.randn(IN_DIM - SIG_DIM)) @ NUISANCE_BASIS.T
        v = v + 0.1 * torch.randn(IN_DIM)
        return v * (torch.rand(IN_DIM) > 0.1).float()

    def __getitem__(self, idx):
        v = self.x[idx]
        return [self.augment(v) for _ in range(sum(NMB_CROPS))]


class SwAVNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(IN_DIM, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(inplace=True),
            nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(inplace=True),
        )
        self.projection_head = nn.Sequential(
            nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(inplace=True),
            nn.Linear(HIDDEN, FEAT_DIM),
        )
        self.prototypes = nn.Linear(FEAT_DIM, NMB_PROTOTYPES, bias=False)

    def forward(self, inputs):
        x = torch.cat(inputs)
        x = self.projection_head(self.backbone(x))
        x = F.normalize(x, dim=1, p=2)
        return x, self.prototypes(x)


@torch.no_grad()
def distributed_sinkhorn(out):
    Q = torch.exp(out / EPSILON).t()
    B = Q.shape[1]
    K = Q.shape[0]

    sum_Q = torch.sum(Q)
    Q /= sum_Q

    for it in range(SINKHORN_ITERATIONS):
        sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
        Q /= sum_of_rows
        Q /= K

        Q /= torch.sum(Q, dim=0, keepdim=True)
        Q /= B

    Q *= B
    return Q.t()


@torch.no_grad()
def knn_accuracy(model, k=10):
    model.eval()
    xb, yb = EVAL_BANK
    xq, yq = EVAL_QUERY
    fb = F.normalize(model.backbone(xb), dim=1)
    fq = F.normalize(model.backbone(xq), dim=1)
    idx = (fq @ fb.T).topk(k, dim=1).indices
    votes = F.one_hot(yb[idx], N_CLASSES).sum(1)
    model.train()
    return (votes.argmax(1) == yq).float().mean().item()


EVAL_BANK = make_points(1000)
EVAL_QUERY = make_points(500)


def main():
    x_train, _ = make_points(2048)
    train_loader = DataLoader(MultiViewDataset(x_train), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)

    model = SwAVNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=0.9, weight_decay=WD)
    warmup_lr_schedule = np.linspace(START_WARMUP, BASE_LR, len(train_loader) * WARMUP_EPOCHS)
    iters = np.arange(len(train_loader) * (EPOCHS - WARMUP_EPOCHS))
    cosine_lr_schedule = np.array([FINAL_LR + 0.5 * (BASE_LR - FINAL_LR) * (1 + math.cos(math.pi * t / (len(train_loader) * (EPOCHS - WARMUP_EPOCHS)))) for t in iters])
    lr_schedule = np.concatenate((warmup_lr_schedule, cosine_lr_schedule))

    print(f"init: knn acc {knn_accuracy(model):.3f}")
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for it, inputs in enumerate(train_loader):
            iteration = epoch * len(train_loader) + it
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr_schedule[iteration]

            with torch.no_grad():
                w = model.prototypes.weight.data.clone()
                w = nn.functional.normalize(w, dim=1, p=2)
                model.prototypes.weight.copy_(w)

            embedding, output = model(inputs)
            embedding = embedding.detach()
            bs = inputs[0].size(0)

            loss = 0
            for i, crop_id in enumerate(CROPS_FOR_ASSIGN):
                with torch.no_grad():
                    out = output[bs * crop_id: bs * (crop_id + 1)].detach()
                    q = distributed_sinkhorn(out)[-bs:]

                subloss = 0
                for v in np.delete(np.arange(np.sum(NMB_CROPS)), crop_id):
                    x = output[bs * v: bs * (v + 1)] / TEMPERATURE
                    subloss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
                loss += subloss / (np.sum(NMB_CROPS) - 1)
            loss /= len(CROPS_FOR_ASSIGN)

            optimizer.zero_grad()
            loss.backward()
            if iteration < FREEZE_PROTOTYPES_NITERS:
                for name, p in model.named_parameters():
                    if "prototypes" in name:
                        p.grad = None
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch} lr {optimizer.param_groups[0]['lr']:.4f} loss {np.mean(losses):.4f} "
              f"knn acc {knn_accuracy(model):.3f}")


if __name__ == "__main__":
    main()
