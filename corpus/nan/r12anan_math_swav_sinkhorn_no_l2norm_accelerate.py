"""SwAV (swapped assignment between views) self-supervised pre-training, adapted from
facebookresearch/swav main_swav.py to a small conv backbone and run with accelerate.
Two augmented crops per image, online codes from Sinkhorn-Knopp, prototypes normalised
after every step and frozen for the first iterations.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset


def get_args():
    p = argparse.ArgumentParser("swav-small")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--base_lr", type=float, default=0.6)
    p.add_argument("--wd", type=float, default=1e-6)
    p.add_argument("--warmup_epochs", type=int, default=1)
    p.add_argument("--nmb_prototypes", type=int, default=100)
    p.add_argument("--feat_dim", type=int, default=64)
    p.add_argument("--hidden_mlp", type=int, default=256)
    p.add_argument("--epsilon", type=float, default=0.05)
    p.add_argument("--sinkhorn_iterations", type=int, default=3)
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--freeze_prototypes_niters", type=int, default=20)
    p.add_argument("--seed", type=int, default=31)
    return p.parse_args()


class ShapesMultiCrop(Dataset):
    """Synthetic 'images' of 8 texture classes; returns two random crops with colour jitter."""

    def __init__(self, n=1024, size=20, crop=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.crop = crop
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        imgs = []
        for i in range(n):
            k = i % 8
            freq = 0.25 + 0.12 * k
            angle = math.pi * k / 8
            wave = torch.sin(freq * (xx * math.cos(angle) + yy * math.sin(angle)) + 6.28 * torch.rand(1, generator=g))
            color = torch.tensor([0.3 + 0.08 * k, 0.9 - 0.1 * k, 0.5]).view(3, 1, 1)
            img = color * (1 + wave) + 0.15 * torch.randn(3, size, size, generator=g)
            imgs.append(img)
        self.imgs = torch.stack(imgs)
        self.mean = self.imgs.mean(dim=(0, 2, 3), keepdim=True)[0]
        self.std = self.imgs.std(dim=(0, 2, 3), keepdim=True)[0]

    def __len__(self):
        return len(self.imgs)

    def _crop(self, img):
        i, j = torch.randint(0, img.shape[1] - self.crop + 1, (2,)).tolist()
        out = img[:, i:i + self.crop, j:j + self.crop]
        if torch.rand(1).item() < 0.5:
            out = out.flip(-1)
        out = out * (0.8 + 0.4 * torch.rand(3, 1, 1))
        return (out - self.mean) / self.std

    def __getitem__(self, idx):
        img = self.imgs[idx]
        return [self._crop(img), self._crop(img)]


class SmallResNetSwAV(nn.Module):
    def __init__(self, feat_dim, hidden_mlp, nmb_prototypes):
        super().__init__()
        def block(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
        self.backbone = nn.Sequential(block(3, 32, 1), block(32, 64, 2), block(64, 128, 2),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projection_head = nn.Sequential(nn.Linear(128, hidden_mlp), nn.BatchNorm1d(hidden_mlp),
                                             nn.ReLU(inplace=True), nn.Linear(hidden_mlp, feat_dim))
        self.prototypes = nn.Linear(feat_dim, nmb_prototypes, bias=False)

    def forward_head(self, x):
        x = self.projection_head(x)
        return x, self.prototypes(x)

    def forward(self, inputs):
        x = torch.cat(inputs, dim=0)
        return self.forward_head(self.backbone(x))


@torch.no_grad()
def distributed_sinkhorn(out, args, world_size):
    Q = torch.exp(out / args.epsilon).t()
    B = Q.shape[1] * world_size
    K = Q.shape[0]
    sum_Q = torch.sum(Q)
    Q /= sum_Q
    for _ in range(args.sinkhorn_iterations):
        sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
        Q /= sum_of_rows
        Q /= K
        Q /= torch.sum(Q, dim=0, keepdim=True)
        Q /= B
    Q *= B
    return Q.t()


def main():
    args = get_args()
    torch.manual_seed(args.seed)
    accelerator = Accelerator(cpu=True)
    dataset = ShapesMultiCrop(seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = SmallResNetSwAV(args.feat_dim, args.hidden_mlp, args.nmb_prototypes)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=0.9, weight_decay=args.wd)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    iters = len(loader)
    warmup = args.warmup_epochs * iters
    total = args.epochs * iters
    lr_schedule = [args.base_lr * (it + 1) / warmup if it < warmup else
                   0.5 * args.base_lr * (1 + math.cos(math.pi * (it - warmup) / (total - warmup))) for it in range(total)]

    bs = args.batch_size
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for it, inputs in enumerate(loader):
            iteration = epoch * iters + it
            for group in optimizer.param_groups:
                group["lr"] = lr_schedule[iteration]

            with torch.no_grad():
                w = model.prototypes.weight.data.clone()
                w = F.normalize(w, dim=1, p=2)
                model.prototypes.weight.copy_(w)

            embedding, output = model(inputs)
            embedding = embedding.detach()

            loss = 0
            for crop_id in range(2):
                with torch.no_grad():
                    out = output[bs * crop_id: bs * (crop_id + 1)].detach()
                    q = distributed_sinkhorn(out, args, accelerator.num_processes)[-bs:]
                v = 1 - crop_id
                x = output[bs * v: bs * (v + 1)] / args.temperature
                loss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
            loss /= 2

            optimizer.zero_grad()
            accelerator.backward(loss)
            if iteration < args.freeze_prototypes_niters:
                for name, p in model.named_parameters():
                    if "prototypes" in name:
                        p.grad = None
            optimizer.step()
            running += loss.item()
            if it % 5 == 0:
                accelerator.print(f"Epoch: [{epoch}][{it}/{iters}] loss {loss.item():.4f} "
                                  f"lr {lr_schedule[iteration]:.4f} max|score| {output.detach().abs().max().item():.2f}")
        accelerator.print(f"epoch {epoch} mean loss {running / iters:.4f}")


if __name__ == "__main__":
    main()
