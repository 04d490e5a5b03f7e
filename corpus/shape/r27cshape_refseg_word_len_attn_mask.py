"""Referring image segmentation (ETRIS/CRIS style) on a toy data set.

A CLIP-style text transformer encodes the referring expression ("the red square"),
a small conv encoder the image; the sentence feature modulates the visual features
and a light decoder predicts the mask of the referred object. Reports the loss and
the mean IoU on a validation split after every epoch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

cfg = {
    "word_len": 17,
    "word_dim": 64,
    "vis_dim": 64,
    "text_layers": 1,
    "text_heads": 4,
    "batch_size": 32,
    "lr": 3e-3,
    "epochs": 5,
}

# CLIP-style tokenizer: <sot> words <eot>, zero padded to the context length
CONTEXT_LENGTH = 24
WORDS = ["the", "a", "red", "green", "blue", "yellow", "square", "block", "object"]
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}
SOT, EOT = len(VOCAB) + 1, len(VOCAB) + 2
VOCAB_SIZE = EOT + 1
COLORS = {"red": (1.0, 0.1, 0.1), "green": (0.1, 1.0, 0.1), "blue": (0.1, 0.1, 1.0), "yellow": (1.0, 1.0, 0.1)}


def tokenize(text, context_length=CONTEXT_LENGTH):
    ids = [SOT] + [VOCAB[w] for w in text.split()] + [EOT]
    out = torch.zeros(context_length, dtype=torch.long)
    out[:len(ids)] = torch.tensor(ids)
    return out


class RefShapes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        names = list(COLORS)
        self.items = []
        for _ in range(n):
            img = 0.1 * torch.rand(3, 32, 32, generator=g)
            perm = torch.randperm(len(names), generator=g)[:2].tolist()
            masks = []
            for k, ci in enumerate(perm):
                r = int(torch.randint(0, 20, (1,), generator=g))
                c = int(torch.randint(0, 8, (1,), generator=g)) + 16 * k
                m = torch.zeros(1, 32, 32)
                m[:, r:r + 10, c:c + 8] = 1.0
                img = img * (1 - m) + m * torch.tensor(COLORS[names[ci]]).view(3, 1, 1)
                masks.append(m)
            which = int(torch.randint(0, 2, (1,), generator=g))
            det = ["the", "a"][int(torch.randint(0, 2, (1,), generator=g))]
            noun = ["square", "block", "object"][int(torch.randint(0, 3, (1,), generator=g))]
            sent = f"{det} {names[perm[which]]} {noun}"
            self.items.append((img, tokenize(sent), masks[which]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, attn_mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model * 4), nn.GELU(), nn.Linear(d_model * 4, d_model))
        self.ln_2 = nn.LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x):
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class TextEncoder(nn.Module):
    def __init__(self, word_len, width, layers, heads):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB_SIZE, width)
        self.positional_embedding = nn.Parameter(0.01 * torch.randn(CONTEXT_LENGTH, width))
        mask = self.build_attention_mask(word_len)
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, mask) for _ in range(layers)])
        self.ln_final = nn.LayerNorm(width)

    @staticmethod
    def build_attention_mask(context_length):
        mask = torch.empty(context_length, context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)
        return mask

    def forward(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.resblocks(x)
        x = x.permute(1, 0, 2)
        x = self.ln_final(x)
        state = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
        return x, state


class RefSegNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, cfg["vis_dim"], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.text_encoder = TextEncoder(cfg["word_len"], cfg["word_dim"], cfg["text_layers"], cfg["text_heads"])
        self.txt_proj = nn.Linear(cfg["word_dim"], cfg["vis_dim"])
        self.fuse = nn.Sequential(nn.Conv2d(2 * cfg["vis_dim"], cfg["vis_dim"], 1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.Conv2d(cfg["vis_dim"], 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 1, 1),
            nn.Upsample(scale_factor=4, mode="bilinear", align_corners=False),
        )

    def forward(self, img, word):
        vis = self.backbone(img)
        _, state = self.text_encoder(word)
        txt = self.txt_proj(state)[:, :, None, None].expand_as(vis)
        fq = self.fuse(torch.cat([vis, txt], dim=1))
        return self.decoder(fq)


train_loader = DataLoader(RefShapes(1024, 1), batch_size=cfg["batch_size"], shuffle=True)
val_loader = DataLoader(RefShapes(256, 2), batch_size=64)

model = RefSegNet(cfg)
optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])

for epoch in range(cfg["epochs"]):
    model.train()
    total = 0.0
    for img, word, mask in train_loader:
        pred = model(img, word)
        loss = F.binary_cross_entropy_with_logits(pred, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()

    model.eval()
    ious = []
    with torch.no_grad():
        for img, word, mask in val_loader:
            pred = (model(img, word) > 0).float()
            inter = (pred * mask).sum((1, 2, 3))
            union = ((pred + mask) > 0).float().sum((1, 2, 3))
            ious.append(inter / union.clamp(min=1))
    print(f"epoch {epoch + 1}: loss {total / len(train_loader):.4f}  val mIoU {torch.cat(ious).mean():.3f}")
