"""Fine-tune a (small) SAM-style segmenter without prompts on a 3-class mask task.

Image encoder -> prompt encoder (no prompts: default embeddings) -> mask decoder,
loss = Dice + CrossEntropy, AdamW with warm-up, validation Dice every 2 epochs.
Fine-tuning modes follow finetune-SAM: 'vanilla' (decoder only unless
if_update_encoder), 'adapter' (only Adapter layers are updated).
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--finetune_type", type=str, default="adapter")
    parser.add_argument("--if_update_encoder", type=bool, default=False)
    parser.add_argument("--if_encoder_adapter", type=bool, default=False)
    parser.add_argument("--if_mask_decoder_adapter", type=bool, default=False)
    parser.add_argument("--num_cls", type=int, default=3)
    parser.add_argument("--img_size", type=int, default=32)
    parser.add_argument("--out_size", type=int, default=32)
    parser.add_argument("--b", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--if_warmup", type=bool, default=True)
    parser.add_argument("--warmup_period", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=6)
    return parser.parse_args(argv)


args = parse_args([])


class ShapesSegDataset(Dataset):
    """Gray images with a disc (class 1) and/or a square (class 2) on textured noise."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        s = args.img_size
        yy, xx = np.mgrid[0:s, 0:s]
        self.images = np.zeros((n, 3, s, s), dtype=np.float32)
        self.masks = np.zeros((n, 1, s, s), dtype=np.int64)
        for i in range(n):
            img = rng.normal(0.0, 0.25, size=(s, s))
            msk = np.zeros((s, s), dtype=np.int64)
            if rng.random() < 0.8:
                cx, cy, r = rng.integers(7, s - 7), rng.integers(7, s - 7), rng.integers(3, 7)
                disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
                img[disc] += 1.0
                msk[disc] = 1
            if rng.random() < 0.8:
                x0, y0, w = rng.integers(0, s - 10), rng.integers(0, s - 10), rng.integers(4, 10)
                sq = np.zeros((s, s), dtype=bool)
                sq[y0:y0 + w, x0:x0 + w] = True
                img[sq] -= 1.0
                msk[sq] = 2
            self.images[i] = np.stack([img, img * 0.8, img * 0.6])
            self.masks[i, 0] = msk

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": torch.from_numpy(self.images[idx]), "mask": torch.from_numpy(self.masks[idx])}


class Adapter(nn.Module):
    def __init__(self, dim, ratio=0.25):
        super().__init__()
        hidden = int(dim * ratio)
        self.fc1 = nn.Conv2d(dim, hidden, 1)
        self.fc2 = nn.Conv2d(hidden, dim, 1)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cin, cout, stride, adapter):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.norm = nn.GroupNorm(4, cout)
        self.Adapter = Adapter(cout) if adapter else nn.Identity()

    def forward(self, x):
        return self.Adapter(F.gelu(self.norm(self.conv(x))))


class ImageEncoder(nn.Module):
    def __init__(self, adapter):
        super().__init__()
        self.blocks = nn.Sequential(
            Block(3, 32, 2, adapter), Block(32, 64, 2, adapter), Block(64, 64, 1, adapter)
        )
        self.neck = nn.Conv2d(64, 64, 1)

    def forward(self, x):
        return self.neck(self.blocks(x))


class PromptEncoder(nn.Module):
    def __init__(self, dim=64, size=8):
        super().__init__()
        self.no_mask_embed = nn.Embedding(1, dim)
        self.pe = nn.Parameter(torch.randn(1, dim, size, size) * 0.1)
        self.size = size

    def get_dense_pe(self):
        return self.pe

    def forward(self, points=None, boxes=None, masks=None):
        sparse = torch.zeros(1, 0, self.no_mask_embed.embedding_dim)
        dense = self.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(1, -1, self.size, self.size)
        return sparse, dense


class MaskDecoder(nn.Module):
    def __init__(self, num_cls, adapter, dim=64):
        super().__init__()
        self.mix = nn.Conv2d(dim, dim, 3, padding=1)
        self.Adapter = Adapter(dim) if adapter else nn.Identity()
        self.up1 = nn.ConvTranspose2d(dim, 32, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.head = nn.Conv2d(16, num_cls, 1)

    def forward(self, image_embeddings, image_pe, sparse_prompt_embeddings, dense_prompt_embeddings,
                multimask_output=True):
        x = image_embeddings + image_pe + dense_prompt_embeddings
        x = self.Adapter(F.gelu(self.mix(x)))
        x = F.gelu(self.up1(x))
        x = F.gelu(self.up2(x))
        return self.head(x), None


class Sam(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.image_encoder = ImageEncoder(args.if_encoder_adapter)
        self.prompt_encoder = PromptEncoder()
        self.mask_decoder = MaskDecoder(args.num_cls, args.if_mask_decoder_adapter)


def dice_loss(pred, target, num_cls):
    prob = pred.softmax(dim=1)
    onehot = F.one_hot(target.squeeze(1), num_cls).permute(0, 3, 1, 2).float()
    inter = (prob * onehot).sum(dim=(2, 3))
    denom = (prob ** 2).sum(dim=(2, 3)) + (onehot ** 2).sum(dim=(2, 3))
    return 1.0 - ((2 * inter + 1e-5) / (denom + 1e-5)).mean()


def dice_coeff_multi_class(pred, target, num_cls):
    scores = []
    for c in range(1, num_cls):
        p, t = pred == c, target == c
        if t.sum() == 0 and p.sum() == 0:
            continue
        scores.append((2.0 * (p & t).sum().item()) / (p.sum().item() + t.sum().item()))
    return float(np.mean(scores)) if scores else 1.0


def train_model(trainloader, valloader, epochs):
    b_lr = args.lr / args.warmup_period if args.if_warmup else args.lr
    sam = Sam(args)
    if args.finetune_type == "adapter":
        for n, value in sam.named_parameters():
            if "Adapter" not in n:
                value.requires_grad = False
        print("if update encoder:", args.if_update_encoder)
        print("if image encoder adapter:", args.if_encoder_adapter)
        print("if mask decoder adapter:", args.if_mask_decoder_adapter)
    elif args.finetune_type == "vanilla" and args.if_update_encoder == False:
        for n, value in sam.image_encoder.named_parameters():
            value.requires_grad = False

    optimizer = torch.optim.AdamW(sam.parameters(), lr=b_lr, betas=(0.9, 0.999), weight_decay=0.1)
    optimizer.zero_grad()
    criterion2 = nn.CrossEntropyLoss()
    iter_num = 0
    max_iterations = epochs * len(trainloader)

    for epoch in range(epochs):
        sam.train()
        train_loss = 0.0
        for i, data in enumerate(trainloader):
            imgs, msks = data["image"], data["mask"]
            if args.if_update_encoder:
                img_emb = sam.image_encoder(imgs)
            else:
                with torch.no_grad():
                    img_emb = sam.image_encoder(imgs)
            sparse_emb, dense_emb = sam.prompt_encoder(points=None, boxes=None, masks=None)
            pred, _ = sam.mask_decoder(image_embeddings=img_emb, image_pe=sam.prompt_encoder.get_dense_pe(),
                                       sparse_prompt_embeddings=sparse_emb, dense_prompt_embeddings=dense_emb,
                                       multimask_output=True)
            loss_dice = dice_loss(pred, msks, args.num_cls)
            loss_ce = criterion2(pred, torch.squeeze(msks, 1))
            loss = loss_dice + loss_ce
            if not loss.requires_grad:
                loss.requires_grad = True

            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

            if args.if_warmup and iter_num < args.warmup_period:
                lr_ = args.lr * ((iter_num + 1) / args.warmup_period)
            else:
                shift_iter = iter_num - args.warmup_period
                lr_ = args.lr * (1.0 - shift_iter / max_iterations) ** 0.9
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr_

            train_loss += loss.item()
            iter_num += 1
        train_loss /= i + 1
        print(f"Epoch num {epoch} | train loss {train_loss:.4f} | lr {lr_:.2e}")

        if epoch % 2 == 1:
            sam.eval()
            eval_loss, dsc = 0.0, 0.0
            with torch.no_grad():
                for j, data in enumerate(valloader):
                    imgs, msks = data["image"], data["mask"]
                    img_emb = sam.image_encoder(imgs)
                    sparse_emb, dense_emb = sam.prompt_encoder(points=None, boxes=None, masks=None)
                    pred, _ = sam.mask_decoder(image_embeddings=img_emb,
                                               image_pe=sam.prompt_encoder.get_dense_pe(),
                                               sparse_prompt_embeddings=sparse_emb,
                                               dense_prompt_embeddings=dense_emb, multimask_output=True)
                    loss = dice_loss(pred, msks, args.num_cls) + criterion2(pred, torch.squeeze(msks, 1))
                    eval_loss += loss.item()
                    dsc += dice_coeff_multi_class(pred.argmax(dim=1), msks.squeeze(1), args.num_cls)
            print(f"Eval Epoch num {epoch} | val loss {eval_loss / (j + 1):.4f} | dsc {dsc / (j + 1):.4f}")


if __name__ == "__main__":
    train_dataset = ShapesSegDataset(400, seed=1)
    eval_dataset = ShapesSegDataset(96, seed=2)
    trainloader = DataLoader(train_dataset, batch_size=args.b, shuffle=True)
    valloader = DataLoader(eval_dataset, batch_size=args.b, shuffle=False)
    train_model(trainloader, valloader, args.epochs)
