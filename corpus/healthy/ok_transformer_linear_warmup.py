"""Tiny Transformer encoder on the "histogram" task, with linear warm-up then linear decay.

For every position the model must say how many times that position's token occurs
in the whole sequence. AdamW with the usual BERT-style schedule: the rate climbs
linearly from 0 to its peak over the warm-up steps, then falls linearly to 0.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

VOCAB = 8
SEQ_LEN = 12
D_MODEL = 64
N_HEAD = 4
N_LAYERS = 2
BATCH_SIZE = 64
PEAK_LR = 3e-3
WARMUP_STEPS = 30
TOTAL_STEPS = 250
LOG_EVERY = 25


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step)
                   / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda)


def make_batch(batch_size, generator):
    x = torch.randint(0, VOCAB, (batch_size, SEQ_LEN), generator=generator)
    # count of x[b, i] inside row b
    y = (x.unsqueeze(2) == x.unsqueeze(1)).sum(-1) - 1  # 0 .. SEQ_LEN-1
    return x, y


class HistogramTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, D_MODEL)
        self.pos_emb = nn.Parameter(torch.zeros(1, SEQ_LEN, D_MODEL))
        layer = nn.TransformerEncoderLayer(D_MODEL, N_HEAD, dim_feedforward=2 * D_MODEL,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, N_LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, SEQ_LEN)
        nn.init.normal_(self.pos_emb, std=0.02)

    def forward(self, x):
        h = self.tok_emb(x) * math.sqrt(D_MODEL) + self.pos_emb
        h = self.encoder(h)
        return self.head(self.norm(h))


@torch.no_grad()
def evaluate(model, generator):
    model.eval()
    x, y = make_batch(512, generator)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, SEQ_LEN), y.reshape(-1)).item()
    acc = (logits.argmax(-1) == y).float().mean().item()
    model.train()
    return loss, acc


def main():
    torch.manual_seed(0)
    train_gen = torch.Generator().manual_seed(1)
    eval_gen = torch.Generator().manual_seed(2)

    model = HistogramTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, WARMUP_STEPS, TOTAL_STEPS)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")

    running = 0.0
    for step in range(1, TOTAL_STEPS + 1):
        x, y = make_batch(BATCH_SIZE, train_gen)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, SEQ_LEN), y.reshape(-1))

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()

        running += loss.item()
        if step % LOG_EVERY == 0:
            print(f"step {step:4d} | lr {scheduler.get_last_lr()[0]:.2e} | "
                  f"train loss {running / LOG_EVERY:.4f}")
            running = 0.0
        if step % 125 == 0:
            val_loss, val_acc = evaluate(model, eval_gen)
            print(f"           eval loss {val_loss:.4f} | eval acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
