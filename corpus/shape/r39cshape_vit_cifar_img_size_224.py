"""Fine-tune-style training of a small Vision Transformer on CIFAR-10-sized images
(32x32, 10 classes); synthetic class-pattern images stand in for CIFAR-10."""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

CONFIG = {
    "patch_size": 8,
    "hidden_size": 64,
    "mlp_dim": 128,
    "num_heads": 4,
    "num_layers": 2,
    "dropout_rate": 0.1,
}


class SyntheticCIFAR(Dataset):
    def __init__(self, n, seed):
        protos = torch.randn(10, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.images = protos[self.labels] + 2.5 * torch.randn(n, 3, 32, 32, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Embeddings(nn.Module):
    def __init__(self, config, img_size, in_channels=3):
        super().__init__()
        patch_size = config["patch_size"]
        n_patches = (img_size // patch_size) * (img_size // patch_size)
        self.patch_embeddings = nn.Conv2d(in_channels, config["hidden_size"], kernel_size=patch_size, stride=patch_size)
        self.position_embeddings = nn.Parameter(torch.zeros(1, n_patches + 1, config["hidden_size"]))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config["hidden_size"]))
        self.dropout = nn.Dropout(config["dropout_rate"])
        nn.init.trunc_normal_(self.position_embeddings, std=0.02)

    def forward(self, x):
        B = x.shape[0]
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = self.patch_embeddings(x)
        x = x.flatten(2).transpose(-1, -2)
        x = torch.cat((cls_tokens, x), dim=1)
        embeddings = x + self.position_embeddings
        return self.dropout(embeddings)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        h = config["hidden_size"]
        self.attention_norm = nn.LayerNorm(h, eps=1e-6)
        self.attn = nn.MultiheadAttention(h, config["num_heads"], dropout=config["dropout_rate"], batch_first=True)
        self.ffn_norm = nn.LayerNorm(h, eps=1e-6)
        self.ffn = nn.Sequential(nn.Linear(h, config["mlp_dim"]), nn.GELU(), nn.Dropout(config["dropout_rate"]),
                                 nn.Linear(config["mlp_dim"], h), nn.Dropout(config["dropout_rate"]))

    def forward(self, x):
        y = self.attention_norm(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.ffn(self.ffn_norm(x))


class VisionTransformer(nn.Module):
    def __init__(self, config, img_size=224, num_classes=21843):
        super().__init__()
        self.embeddings = Embeddings(config, img_size=img_size)
        self.encoder = nn.ModuleList([Block(config) for _ in range(config["num_layers"])])
        self.encoder_norm = nn.LayerNorm(config["hidden_size"], eps=1e-6)
        self.head = nn.Linear(config["hidden_size"], num_classes)

    def forward(self, x):
        x = self.embeddings(x)
        for layer in self.encoder:
            x = layer(x)
        x = self.encoder_norm(x)
        return self.head(x[:, 0])


train_loader = DataLoader(SyntheticCIFAR(4000, seed=1), batch_size=64, shuffle=True)
test_loader = DataLoader(SyntheticCIFAR(1000, seed=2), batch_size=250)

model = VisionTransformer(CONFIG, num_classes=10)
optimizer = torch.optim.SGD(model.parameters(), lr=3e-2, momentum=0.9)
total_steps = 3 * len(train_loader)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
criterion = nn.CrossEntropyLoss()

global_step = 0
for epoch in range(3):
    model.train()
    for x, y in train_loader:
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        global_step += 1
        if global_step % 20 == 0:
            print(f"Training ({global_step} / {total_steps} Steps) (loss={loss.item():.5f})")
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (model(x).argmax(-1) == y).sum().item()
    print(f"epoch {epoch} valid accuracy {correct / len(test_loader.dataset):.4f}")
