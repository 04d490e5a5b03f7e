"""Referring segmentation on a toy scene, with LAVT's pixel-word attention (PWAM) and gate.

Each scene is an 8x8 grid of cells, each cell one of two colours drawn from a palette of
six; the visual backbone features of a cell are its colour code plus noise. The expression
("segment the red region", ...) names one of the two colours and the model must segment the
cells of that colour. As in the paper, the language-gated residual is initialised to 0 "to
ease the start of training".
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange"]
TEMPLATES = ["segment the {} region", "{} cells", "all the {} ones please", "find every {} square", "{}"]
VOCAB = ["<pad>"] + sorted({w for t in TEMPLATES for w in t.format("").split()} | set(COLOURS))
WORD2ID = {w: i for i, w in enumerate(VOCAB)}
GRID, VIS_DIM, MAX_WORDS = 8, 32, 6


class ToyRefCOCO(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        rng = random.Random(seed)
        colour_codes = torch.randn(len(COLOURS), VIS_DIM, generator=torch.Generator().manual_seed(123))
        self.feats, self.words, self.masks = [], [], []
        for _ in range(n):
            pair = rng.sample(range(len(COLOURS)), 2)
            cell_colour = torch.tensor(pair)[torch.randint(0, 2, (GRID * GRID,), generator=g)]
            target = rng.choice(pair)
            feats = colour_codes[cell_colour] + 0.5 * torch.randn(GRID * GRID, VIS_DIM, generator=g)
            sentence = rng.choice(TEMPLATES).format(COLOURS[target]).split()
            ids = torch.zeros(MAX_WORDS, dtype=torch.long)
            ids[:len(sentence)] = torch.tensor([WORD2ID[w] for w in sentence])
            self.feats.append(feats)
            self.words.append(ids)
            self.masks.append((cell_colour == target).float())
        self.feats = torch.stack(self.feats)
        self.words = torch.stack(self.words)
        self.masks = torch.stack(self.masks)

    def __len__(self):
        return len(self.feats)

    def __getitem__(self, idx):
        words = self.words[idx]
        return self.feats[idx], words, (words != 0).float(), self.masks[idx]


class PWAM(nn.Module):
    """Pixel-word attention: each pixel attends to the words, then is multiplied with them."""

    def __init__(self, dim, l_dim, num_heads=1):
        super().__init__()
        self.vis_project = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(l_dim, dim)
        self.v = nn.Linear(l_dim, dim)
        self.project_mm = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        self.scale = dim ** -0.5

    def forward(self, x, l, l_mask):
        vis = self.vis_project(x)
        attn = (self.q(x) @ self.k(l).transpose(1, 2)) * self.scale
        attn = attn.masked_fill(l_mask[:, None, :] == 0, float("-inf")).softmax(dim=-1)
        lang = attn @ self.v(l)
        return self.project_mm(vis * lang)


class MMBasicLayer(nn.Module):
    def __init__(self, dim, l_dim):
        super().__init__()
        self.block = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.fusion = PWAM(dim, l_dim)
        self.res_gate = nn.Sequential(
            nn.Linear(dim, dim, bias=False),
            nn.ReLU(),
            nn.Linear(dim, dim, bias=False),
            nn.Tanh()
        )
        # initialize the gate to 0
        nn.init.zeros_(self.res_gate[0].weight)
        nn.init.zeros_(self.res_gate[2].weight)

    def forward(self, x, l, l_mask):
        x = x + self.block(x)
        # PWAM fusion
        x_residual = self.fusion(x, l, l_mask)
        # apply a gate on the residual
        x = x + (self.res_gate(x_residual) * x_residual)
        return x


class LAVT(nn.Module):
    def __init__(self, vocab_size, dim=VIS_DIM, l_dim=32):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, l_dim, padding_idx=0)
        self.text_encoder = nn.Sequential(nn.Linear(l_dim, l_dim), nn.GELU(), nn.Linear(l_dim, l_dim))
        self.patch_embed = nn.Linear(VIS_DIM, dim)
        self.layers = nn.ModuleList([MMBasicLayer(dim, l_dim) for _ in range(1)])
        self.classifier = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1))

    def forward(self, feats, words, l_mask):
        l = self.text_encoder(self.word_embeddings(words))
        x = self.patch_embed(feats)
        for layer in self.layers:
            x = layer(x, l, l_mask)
        return self.classifier(x).squeeze(-1)


def iou(logits, target):
    pred = (logits > 0).float()
    inter = (pred * target).sum()
    union = ((pred + target) > 0).float().sum()
    return (inter / union.clamp(min=1)).item()


def main():
    train_loader = DataLoader(ToyRefCOCO(3200, seed=1), batch_size=32, shuffle=True)
    val_set = ToyRefCOCO(400, seed=2)
    model = LAVT(len(VOCAB))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    step = 0
    for epoch in range(2):
        model.train()
        for feats, words, l_mask, target in train_loader:
            logits = model(feats, words, l_mask)
            loss = F.binary_cross_entropy_with_logits(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} iter {step:4d}  loss {loss.item():.4f}  IoU {iou(logits.detach(), target):.3f}")
        model.eval()
        with torch.no_grad():
            feats, words, target = val_set.feats, val_set.words, val_set.masks
            logits = model(feats, words, (words != 0).float())
            val_loss = F.binary_cross_entropy_with_logits(logits, target).item()
        print(f"== epoch {epoch}: val loss {val_loss:.4f}  val IoU {iou(logits, target):.3f}")


if __name__ == "__main__":
    main()
