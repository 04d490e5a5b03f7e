"""LoRA fine-tuning of a small frozen text-to-image decoder on a 'face' concept, with sample renders."""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

config = {
    "concept_mode": "face",
    "resolution": 16,
    "lora_rank": 4,
    "lora_alpha": 8.0,
    "lr": 2e-3,
    "train_batch_size": 8,
    "max_train_steps": 120,
    "checkpointing_steps": 40,
    "n_sample_imgs": 66,
    "seed": 0,
}

VOCAB = ["a", "photo", "of", "<concept>", "person", "smiling", "portrait", "in", "the", "park", "studio",
         "light", "close", "up", "looking", "left", "right", "with", "hat", "glasses", "painting", "sketch"]
TOK = {w: i + 1 for i, w in enumerate(VOCAB)}

val_prompts = {
    "face": [
        "a photo of <concept> smiling",
        "a portrait of <concept> in the studio",
        "a close up photo of <concept>",
        "a painting of <concept> with glasses",
        "a sketch of <concept> looking left",
        "a photo of <concept> in the park",
        "a portrait of <concept> with hat",
        "a photo of <concept> looking right",
    ],
    "object": ["a photo of <concept>", "a <concept> in the studio"],
}


def tokenize(prompt, max_len=8):
    ids = [TOK.get(w, 0) for w in prompt.split()][:max_len]
    return torch.tensor(ids + [0] * (max_len - len(ids)))


class LoRALinear(nn.Module):
    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.lora_down = nn.Linear(base.in_features, rank, bias=False)
        self.lora_up = nn.Linear(rank, base.out_features, bias=False)
        nn.init.normal_(self.lora_down.weight, std=1.0 / rank)
        nn.init.zeros_(self.lora_up.weight)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * self.lora_up(self.lora_down(x))


class TinyTextToImage(nn.Module):
    def __init__(self, vocab_size, res, dim=64):
        super().__init__()
        self.res = res
        self.token_embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.text_proj = nn.Linear(dim, dim)
        self.noise_proj = nn.Linear(32, dim)
        self.decoder = nn.Sequential(nn.Linear(2 * dim, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                                     nn.Linear(256, 3 * res * res))

    def forward(self, ids, z):
        mask = (ids > 0).float().unsqueeze(-1)
        text = (self.token_embedding(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        h = torch.cat([self.text_proj(text), self.noise_proj(z)], dim=-1)
        return torch.tanh(self.decoder(h)).view(-1, 3, self.res, self.res)


def inject_lora(model, rank, alpha):
    for p in model.parameters():
        p.requires_grad_(False)
    for i in (0, 2, 4):
        model.decoder[i] = LoRALinear(model.decoder[i], rank, alpha)
    model.text_proj = LoRALinear(model.text_proj, rank, alpha)
    return [p for n, p in model.named_parameters() if "lora_" in n]


class ConceptDataset(Dataset):
    def __init__(self, res, n=96, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, res), torch.linspace(-1, 1, res), indexing="ij")
        face = torch.stack([0.8 - (xx ** 2 + yy ** 2), 0.5 - (xx ** 2 + yy ** 2), 0.3 - 0.5 * (xx ** 2 + yy ** 2)])
        self.images = (face.unsqueeze(0) + 0.1 * torch.randn(n, 3, res, res, generator=g)).clamp(-1, 1)
        templates = ["a photo of <concept>", "a photo of <concept> person", "a portrait of <concept>",
                     "a close up of <concept> smiling"]
        self.captions = [templates[i % len(templates)] for i in range(n)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return tokenize(self.captions[i]), self.images[i]


@torch.no_grad()
def render_images(model, cfg, step):
    model.eval()
    validation_prompts = random.sample(val_prompts[cfg["concept_mode"]], cfg["n_sample_imgs"])
    ids = torch.stack([tokenize(p) for p in validation_prompts])
    imgs = model(ids, torch.randn(len(ids), 32))
    model.train()
    print(f"  rendered {len(validation_prompts)} validation images at step {step}, "
          f"mean {imgs.mean().item():.3f} std {imgs.std().item():.3f}")
    return validation_prompts


def train(cfg):
    random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    model = TinyTextToImage(len(VOCAB) + 1, cfg["resolution"])
    lora_params = inject_lora(model, cfg["lora_rank"], cfg["lora_alpha"])
    print(f"trainable LoRA params: {sum(p.numel() for p in lora_params)}")
    optimizer = torch.optim.AdamW(lora_params, lr=cfg["lr"], weight_decay=1e-2)
    loader = DataLoader(ConceptDataset(cfg["resolution"]), batch_size=cfg["train_batch_size"], shuffle=True,
                        drop_last=True)
    step, running = 0, 0.0
    while step < cfg["max_train_steps"]:
        for ids, images in loader:
            z = torch.randn(ids.shape[0], 32)
            pred = model(ids, z)
            loss = F.mse_loss(pred, images)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            running += loss.item()
            if step % 10 == 0:
                print(f"step {step:4d} | loss {running / 10:.4f}")
                running = 0.0
            if step % cfg["checkpointing_steps"] == 0:
                render_images(model, cfg, step)
            if step >= cfg["max_train_steps"]:
                break
    print("training done")


if __name__ == "__main__":
    train(config)
