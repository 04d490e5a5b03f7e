"""LoRA fine-tuning of a pretrained face-descriptor encoder for apparent-age regression,
following the diffusers / PixArt LoRA training scripts: the base encoder is frozen, LoRA
adapters are injected into its linear layers, a new regression head is added, and only the
trainable parameters go to the optimizer. Gradients are clipped to max_grad_norm before each
step. (The "pretrained" encoder is a seeded stand-in; the descriptors are synthetic.)"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

args = argparse.Namespace(
    seed=0,
    rank=4,
    lora_alpha=8,
    learning_rate=1e-2,
    train_batch_size=64,
    num_train_epochs=4,
    max_grad_norm=1.0,
    desc_dim=64,
    hidden_dim=256,
)

torch.manual_seed(args.seed)
np.random.seed(args.seed)


class FaceAgeDataset(Dataset):
    def __init__(self, n, dim, seed):
        rng = np.random.default_rng(seed)
        proj = np.random.default_rng(1234).normal(size=dim)
        self.desc = rng.normal(size=(n, dim)).astype(np.float32)
        z = self.desc @ proj / 8 * 1.5 + 0.3 * self.desc[:, 1] * self.desc[:, 2]
        self.age = (18 + 62 / (1 + np.exp(-z)) + rng.normal(size=n) * 3).astype(np.float32)

    def __len__(self):
        return len(self.age)

    def __getitem__(self, i):
        return {"descriptor": torch.from_numpy(self.desc[i]), "age": torch.tensor(self.age[i])}


class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) * 0.01)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class FaceEncoder(nn.Module):
    def __init__(self, in_dim, hidden):
        super().__init__()
        self.proj_in = nn.Linear(in_dim, hidden)
        self.proj_out = nn.Linear(hidden, hidden)

    def forward(self, x):
        return F.relu(self.proj_out(F.relu(self.proj_in(x))))


class AgeRegressor(nn.Module):
    def __init__(self, encoder, hidden):
        super().__init__()
        self.encoder = encoder
        self.age_head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.age_head(self.encoder(x)).squeeze(-1)


accelerator = Accelerator(cpu=True)

encoder = FaceEncoder(args.desc_dim, args.hidden_dim)
encoder.requires_grad_(False)
encoder.proj_in = LoRALinear(encoder.proj_in, args.rank, args.lora_alpha)
encoder.proj_out = LoRALinear(encoder.proj_out, args.rank, args.lora_alpha)
model = AgeRegressor(encoder, args.hidden_dim)

lora_layers = filter(lambda p: p.requires_grad, model.parameters())
optimizer = torch.optim.SGD(lora_layers, lr=args.learning_rate, momentum=0.9)

train_dataset = FaceAgeDataset(3200, args.desc_dim, seed=1)
val_dataset = FaceAgeDataset(800, args.desc_dim, seed=2)
train_dataloader = DataLoader(train_dataset, batch_size=args.train_batch_size, shuffle=True)
val_dataloader = DataLoader(val_dataset, batch_size=256)

model, optimizer, train_dataloader, val_dataloader = accelerator.prepare(
    model, optimizer, train_dataloader, val_dataloader
)

n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
n_total = sum(p.numel() for p in model.parameters())
accelerator.print(f"trainable params: {n_trainable} || all params: {n_total}")

global_step = 0
for epoch in range(args.num_train_epochs):
    model.train()
    train_loss = 0.0
    for batch in train_dataloader:
        pred = model(batch["descriptor"])
        loss = F.mse_loss(pred, batch["age"])
        accelerator.backward(loss)
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(lora_layers, args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
        train_loss += loss.item()
        if global_step == 1 or global_step % 10 == 0:
            accelerator.print(f"step {global_step} loss {loss.item():.4f}")

    model.eval()
    abs_err, count = 0.0, 0
    with torch.no_grad():
        for batch in val_dataloader:
            pred = model(batch["descriptor"])
            abs_err += (pred - batch["age"]).abs().sum().item()
            count += batch["age"].numel()
    accelerator.print(
        f"epoch {epoch + 1} train mse {train_loss / len(train_dataloader):.4f} "
        f"val mae {abs_err / count:.3f} years"
    )
