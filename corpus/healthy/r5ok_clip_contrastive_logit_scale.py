"""A small CLIP trained the way open_clip trains it: an image tower and a text tower project
into a shared space, the logits are the cosine similarities times exp(logit_scale) (a learnable
temperature initialised to 1/0.07 and clamped to 100), and the loss is the symmetric
cross-entropy over the batch. AdamW without weight decay on gains, biases and logit_scale, and
open_clip's cosine_lr schedule (linear warm-up, then cosine) assigned every step.

Synthetic image-caption pairs: an image shows one of 8 shapes in one of 8 colours at a random
offset; its caption names the colour and the shape among a few filler words.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_COLORS, N_SHAPES, IMG, VOCAB, CTX = 8, 8, 16, 64, 8
BATCH_SIZE, EPOCHS, LR, WD, WARMUP = 64, 5, 1e-3, 0.2, 20


class CaptionedShapes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.palette = torch.rand(N_COLORS, 3, generator=torch.Generator().manual_seed(1))
        self.masks = (torch.rand(N_SHAPES, 8, 8, generator=torch.Generator().manual_seed(2)) > 0.5).float()
        self.color = torch.randint(0, N_COLORS, (n,), generator=g)
        self.shape = torch.randint(0, N_SHAPES, (n,), generator=g)
        self.offset = torch.randint(0, IMG - 8, (n, 2), generator=g)
        self.noise_seed = torch.randint(0, 2 ** 30, (n,), generator=g)

    def __len__(self):
        return len(self.color)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(int(self.noise_seed[i]))
        img = 0.1 * torch.randn(3, IMG, IMG, generator=g)
        y, x = self.offset[i].tolist()
        img[:, y:y + 8, x:x + 8] += self.palette[self.color[i]][:, None, None] * self.masks[self.shape[i]]
        filler = torch.randint(2 + N_COLORS + N_SHAPES, VOCAB, (CTX - 4,), generator=g)
        words = torch.cat([torch.tensor([2 + self.color[i], 2 + N_COLORS + self.shape[i]]), filler])
        words = words[torch.randperm(CTX - 2, generator=g)]
        text = torch.cat([torch.tensor([0]), words, torch.tensor([1])])
        return img, text


class ImageTower(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.proj = nn.Linear(64, embed_dim)

    def forward(self, x):
        return self.proj(self.conv(x))


class TextTower(nn.Module):
    def __init__(self, embed_dim, width=64):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, width)
        self.positional_embedding = nn.Parameter(torch.randn(CTX, width) * 0.01)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Linear(width, embed_dim, bias=False)

    def forward(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = self.ln_final(self.transformer(x))
        return self.text_projection(x[:, -1])


class CLIP(nn.Module):
    def __init__(self, embed_dim=64):
        super().__init__()
        self.visual = ImageTower(embed_dim)
        self.text = TextTower(embed_dim)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


class ClipLoss(nn.Module):
    def forward(self, image_features, text_features, logit_scale):
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logit_scale * text_features @ image_features.T
        labels = torch.arange(logits_per_image.shape[0])
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


def cosine_lr(optimizer, base_lr, warmup_length, steps):
    def _lr_adjuster(step):
        if step < warmup_length:
            lr = base_lr * (step + 1) / warmup_length
        else:
            e = step - warmup_length
            es = steps - warmup_length
            lr = 0.5 * (1 + math.cos(math.pi * e / es)) * base_lr
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        return lr
    return _lr_adjuster


def main():
    train_loader = DataLoader(CaptionedShapes(1536, seed=0), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)
    val_images, val_texts = next(iter(DataLoader(CaptionedShapes(256, seed=1), batch_size=256)))
    model = CLIP()
    loss_fn = ClipLoss()

    exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n
    named_parameters = list(model.named_parameters())
    gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
    rest_params = [p for n, p in named_parameters if not exclude(n, p) and p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": gain_or_bias_params, "weight_decay": 0.0}, {"params": rest_params, "weight_decay": WD}],
        lr=LR, betas=(0.9, 0.98), eps=1e-6)
    total_steps = len(train_loader) * EPOCHS
    scheduler = cosine_lr(optimizer, LR, WARMUP, total_steps)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        for i, (images, texts) in enumerate(train_loader):
            scheduler(step)
            optimizer.zero_grad()
            image_features, text_features, logit_scale = model(images, texts)
            total_loss = loss_fn(image_features, text_features, logit_scale)
            total_loss.backward()
            optimizer.step()
            with torch.no_grad():
                model.logit_scale.clamp_(0, math.log(100))
            if i % 10 == 0:
                print(f"Train Epoch: {epoch} [{i * BATCH_SIZE}/{len(train_loader.dataset)}] "
                      f"Loss: {total_loss.item():.4f} Logit Scale: {logit_scale.item():.3f} "
                      f"LR: {optimizer.param_groups[0]['lr']:.6f}")
            step += 1
        model.eval()
        with torch.no_grad():
            image_features, text_features, logit_scale = model(val_images, val_texts)
            logits = image_features @ text_features.T
            same = (logits.argmax(1) == torch.arange(len(logits))).float().mean().item()
            val_loss = loss_fn(image_features, text_features, logit_scale).item()
        print(f"Eval Epoch: {epoch} clip_val_loss: {val_loss:.4f} image_to_text_R@1: {same:.3f}")


if __name__ == "__main__":
    main()
