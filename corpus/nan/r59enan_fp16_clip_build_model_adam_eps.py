"""Fine-tuning a small CLIP (openai/CLIP model code: VisionTransformer image tower, causal text
Transformer, symmetric InfoNCE over logits_per_image / logits_per_text) on our own image-caption
pairs. The starting checkpoint is loaded through clip.model.build_model(state_dict)."""
import os
import tempfile
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

COLORS = {"red": (0.9, 0.1, 0.1), "green": (0.1, 0.8, 0.2), "blue": (0.15, 0.25, 0.95),
          "yellow": (0.95, 0.9, 0.1), "purple": (0.6, 0.1, 0.8), "cyan": (0.1, 0.85, 0.9)}
SHAPES = ["circle", "square", "triangle", "cross", "bar"]
WORDS = ["a", "photo", "of"] + list(COLORS) + SHAPES
SOT, EOT = len(WORDS), len(WORDS) + 1
CONTEXT_LENGTH = 10


def tokenize(texts, context_length=CONTEXT_LENGTH):
    result = torch.zeros(len(texts), context_length, dtype=torch.long)
    for i, text in enumerate(texts):
        tokens = [SOT] + [WORDS.index(w) for w in text.split()] + [EOT]
        result[i, :len(tokens)] = torch.tensor(tokens)
    return result


def draw(shape, color, rng):
    yy, xx = np.mgrid[0:32, 0:32]
    cy, cx, r = rng.integers(10, 22), rng.integers(10, 22), rng.integers(5, 9)
    if shape == "circle":
        m = (yy - cy) ** 2 + (xx - cx) ** 2 <= r ** 2
    elif shape == "square":
        m = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
    elif shape == "triangle":
        m = (yy - cy <= r) & (yy - cy >= -r) & (abs(xx - cx) <= (yy - cy + r) / 2)
    elif shape == "cross":
        m = ((abs(yy - cy) <= 2) & (abs(xx - cx) <= r)) | ((abs(xx - cx) <= 2) & (abs(yy - cy) <= r))
    else:
        m = (abs(yy - cy) <= 2) & (abs(xx - cx) <= r + 2)
    img = rng.normal(0.45, 0.08, (3, 32, 32))
    for c in range(3):
        img[c][m] = COLORS[color][c] + rng.normal(0, 0.05, m.sum())
    return img.astype(np.float32)


class CaptionedShapes(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.items = []
        for _ in range(n):
            color, shape = rng.choice(list(COLORS)), rng.choice(SHAPES)
            self.items.append((draw(shape, color, rng), "a photo of a %s %s" % (color, shape)))
        self.mean = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)[:, None, None]
        self.std = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)[:, None, None]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        img, caption = self.items[idx]
        return torch.from_numpy((img - self.mean) / self.std), tokenize([caption])[0]


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16."""

    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, attn_mask: torch.Tensor = None):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(d_model, d_model * 4)),
            ("gelu", QuickGELU()),
            ("c_proj", nn.Linear(d_model * 4, d_model))
        ]))
        self.ln_2 = LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x: torch.Tensor):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x: torch.Tensor):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, attn_mask: torch.Tensor = None):
        super().__init__()
        self.width = width
        self.layers = layers
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, attn_mask) for _ in range(layers)])

    def forward(self, x: torch.Tensor):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution: int, patch_size: int, width: int, layers: int, heads: int, output_dim: int):
        super().__init__()
        self.input_resolution = input_resolution
        self.output_dim = output_dim
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x: torch.Tensor):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        x = x.permute(0, 2, 1)
        x = torch.cat([self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device), x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = x.permute(1, 0, 2)
        x = self.transformer(x)
        x = x.permute(1, 0, 2)
        x = self.ln_post(x[:, 0, :])
        if self.proj is not None:
            x = x @ self.proj
        return x


class CLIP(nn.Module):
    def __init__(self, embed_dim, image_resolution, vision_layers, vision_width, vision_patch_size,
                 context_length, vocab_size, transformer_width, transformer_heads, transformer_layers):
        super().__init__()
        self.context_length = context_length
        vision_heads = vision_width // 64
        self.visual = VisionTransformer(input_resolution=image_resolution, patch_size=vision_patch_size,
                                        width=vision_width, layers=vision_layers, heads=vision_heads,
                                        output_dim=embed_dim)
        self.transformer = Transformer(width=transformer_width, layers=transformer_layers,
                                       heads=transformer_heads, attn_mask=self.build_attention_mask())
        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, transformer_width)
        self.positional_embedding = nn.Parameter(torch.empty(self.context_length, transformer_width))
        self.ln_final = LayerNorm(transformer_width)
        self.text_projection = nn.Parameter(torch.empty(transformer_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.initialize_parameters()

    def initialize_parameters(self):
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (self.transformer.width ** -0.5) * ((2 * self.transformer.layers) ** -0.5)
        attn_std = self.transformer.width ** -0.5
        fc_std = (2 * self.transformer.width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=self.transformer.width ** -0.5)

    def build_attention_mask(self):
        mask = torch.empty(self.context_length, self.context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)
        return mask

    @property
    def dtype(self):
        return self.visual.conv1.weight.dtype

    def encode_image(self, image):
        return self.visual(image.type(self.dtype))

    def encode_text(self, text):
        x = self.token_embedding(text).type(self.dtype)
        x = x + self.positional_embedding.type(self.dtype)
        x = x.permute(1, 0, 2)
        x = self.transformer(x)
        x = x.permute(1, 0, 2)
        x = self.ln_final(x).type(self.dtype)
        x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection
        return x

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        text_features = text_features / text_features.norm(dim=1, keepdim=True)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        logits_per_text = logits_per_image.t()
        return logits_per_image, logits_per_text


def convert_weights(model: nn.Module):
    """Convert applicable model parameters to fp16"""

    def _convert_weights_to_fp16(l):
        if isinstance(l, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            l.weight.data = l.weight.data.half()
            if l.bias is not None:
                l.bias.data = l.bias.data.half()

        if isinstance(l, nn.MultiheadAttention):
            for attr in [*[f"{s}_proj_weight" for s in ["in", "q", "k", "v"]], "in_proj_bias", "bias_k", "bias_v"]:
                tensor = getattr(l, attr)
                if tensor is not None:
                    tensor.data = tensor.data.half()

        for name in ["text_projection", "proj"]:
            if hasattr(l, name):
                attr = getattr(l, name)
                if attr is not None:
                    attr.data = attr.data.half()

    model.apply(_convert_weights_to_fp16)


def build_model(state_dict: dict):
    vision_width = state_dict["visual.conv1.weight"].shape[0]
    vision_layers = len([k for k in state_dict.keys() if k.startswith("visual.") and k.endswith(".attn.in_proj_weight")])
    vision_patch_size = state_dict["visual.conv1.weight"].shape[-1]
    grid_size = round((state_dict["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    image_resolution = vision_patch_size * grid_size
    embed_dim = state_dict["text_projection"].shape[1]
    context_length = state_dict["positional_embedding"].shape[0]
    vocab_size = state_dict["token_embedding.weight"].shape[0]
    transformer_width = state_dict["ln_final.weight"].shape[0]
    transformer_heads = transformer_width // 64
    transformer_layers = len(set(k.split(".")[2] for k in state_dict if k.startswith("transformer.resblocks")))

    model = CLIP(embed_dim, image_resolution, vision_layers, vision_width, vision_patch_size,
                 context_length, vocab_size, transformer_width, transformer_heads, transformer_layers)

    convert_weights(model)
    model.load_state_dict(state_dict)
    return model.eval()


def make_checkpoint(path):
    base = CLIP(embed_dim=64, image_resolution=32, vision_layers=2, vision_width=64, vision_patch_size=8,
                context_length=CONTEXT_LENGTH, vocab_size=EOT + 1, transformer_width=64,
                transformer_heads=1, transformer_layers=2)
    torch.save(base.state_dict(), path)


@torch.no_grad()
def zero_shot_accuracy(model, loader):
    model.eval()
    prompts = ["a photo of a %s %s" % (c, s) for c in COLORS for s in SHAPES]
    text_features = model.encode_text(tokenize(prompts)).float()
    text_features = text_features / text_features.norm(dim=1, keepdim=True)
    correct, total = 0, 0
    for images, texts in loader:
        image_features = model.encode_image(images).float()
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        pred = (image_features @ text_features.t()).argmax(dim=1)
        target = torch.tensor([prompts.index(" ".join(WORDS[t] for t in row[1:row.argmax()].tolist()))
                               for row in texts])
        correct += (pred == target).sum().item()
        total += len(images)
    model.train()
    return correct / total


def main():
    train_set, val_set = CaptionedShapes(512, seed=1), CaptionedShapes(160, seed=2)
    train_dataloader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True)
    val_dataloader = DataLoader(val_set, batch_size=80)

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "clip_small.pt")
        make_checkpoint(ckpt)
        model = build_model(torch.load(ckpt, map_location="cpu"))

    model.train()
    loss_img = nn.CrossEntropyLoss()
    loss_txt = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98))

    print("zero-shot acc before fine-tuning: %.3f" % zero_shot_accuracy(model, val_dataloader))
    step = 0
    for epoch in range(3):
        for images, texts in train_dataloader:
            optimizer.zero_grad()
            logits_per_image, logits_per_text = model(images, texts)
            ground_truth = torch.arange(len(images), dtype=torch.long)
            total_loss = (loss_img(logits_per_image, ground_truth) + loss_txt(logits_per_text, ground_truth)) / 2
            total_loss.backward()
            optimizer.step()
            if step % 5 == 0:
                print("epoch %d step %d loss %.4f" % (epoch, step, total_loss.item()), flush=True)
            step += 1
        print("epoch %d zero-shot acc %.3f" % (epoch, zero_shot_accuracy(model, val_dataloader)), flush=True)


if __name__ == "__main__":
    main()
