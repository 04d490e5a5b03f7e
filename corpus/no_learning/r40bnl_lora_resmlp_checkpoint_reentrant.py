"""LoRA fine-tuning of a residual MLP backbone on a tabular classification task.
The backbone weights are frozen, low-rank adapters are trained on the block
linears together with a fresh classifier head, and gradient checkpointing is
turned on for the residual blocks to save activation memory."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_FEATURES = 16
HIDDEN = 64
N_BLOCKS = 3


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=8, alpha=16):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class ResBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, h):
        return h + self.fc2(F.gelu(self.fc1(self.norm(h))))


class ResMLP(nn.Module):
    def __init__(self, n_features, hidden, n_blocks, n_classes=2):
        super().__init__()
        self.stem = nn.Linear(n_features, hidden)
        self.blocks = nn.ModuleList([ResBlock(hidden) for _ in range(n_blocks)])
        self.norm = nn.LayerNorm(hidden)
        self.classifier = nn.Linear(hidden, n_classes)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(block, h, use_reentrant=True)
            else:
                h = block(h)
        return self.classifier(self.norm(h))


def build_backbone():
    # stand-in for the pretrained checkpoint: small residual branches
    model = ResMLP(N_FEATURES, HIDDEN, N_BLOCKS)
    with torch.no_grad():
        for block in model.blocks:
            block.fc2.weight.mul_(0.05)
            block.fc2.bias.zero_()
    return model


def add_lora(model, r=8, alpha=16):
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.blocks:
        block.fc1 = LoRALinear(block.fc1, r, alpha)
        block.fc2 = LoRALinear(block.fc2, r, alpha)
    model.classifier = nn.Linear(HIDDEN, 2)
    return model


def print_trainable_parameters(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    print(f"trainable params: {trainable} || all params: {total} || trainable%: {100 * trainable / total:.2f}")


def make_data(n):
    x = torch.randn(n, N_FEATURES)
    y = ((x[:, 0] * x[:, 1]) > 0).long()
    return TensorDataset(x, y)


def main():
    train_ds, val_ds = make_data(4096), make_data(1024)
    train_loader = DataLoader(train_ds, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=512)

    model = add_lora(build_backbone())
    model.gradient_checkpointing_enable()
    print_trainable_parameters(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3, weight_decay=0.0)

    for epoch in range(6):
        model.train()
        running, seen = 0.0, 0
        for step, (x, y) in enumerate(train_loader):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item() * y.size(0)
            seen += y.size(0)
            if step % 16 == 0:
                print(f"epoch {epoch} step {step:2d} loss {loss.item():.4f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()
        print(f"epoch {epoch} train_loss {running / seen:.4f} val_acc {correct / len(val_ds):.3f}")


if __name__ == "__main__":
    main()
