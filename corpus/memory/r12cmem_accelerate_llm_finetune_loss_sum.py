"""Fine-tune a small causal language model on instruction-style text with accelerate.

Follows a fine-tuning template: a tokenised dataset of fixed-length blocks, a decoder-only
transformer LM with a causal mask, AdamW with a linear warm-up/decay schedule, accelerate for
device placement and backward, and per-epoch bookkeeping of the average training loss.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

VOCAB = 4096
BLOCK = 128


class TokenBlocks(Dataset):
    def __init__(self, n_blocks, seed=0):
        g = torch.Generator().manual_seed(seed)
        # a toy "language": tokens follow a noisy first-order Markov chain
        trans = torch.randint(0, VOCAB, (VOCAB, 4), generator=g)
        seqs = torch.empty(n_blocks, BLOCK + 1, dtype=torch.long)
        cur = torch.randint(0, VOCAB, (n_blocks,), generator=g)
        for t in range(BLOCK + 1):
            seqs[:, t] = cur
            pick = torch.randint(0, 4, (n_blocks,), generator=g)
            cur = trans[cur, pick]
        self.seqs = seqs

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        s = self.seqs[i]
        return {"input_ids": s[:-1], "labels": s[1:]}


class TinyCausalLM(nn.Module):
    def __init__(self, d_model=128, n_layer=2, n_head=4):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d_model)
        self.wpe = nn.Embedding(BLOCK, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_head, 4 * d_model, dropout=0.1,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.h = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, VOCAB, bias=False)
        mask = torch.triu(torch.full((BLOCK, BLOCK), float("-inf")), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, input_ids, labels=None):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        x = self.h(x, mask=self.causal_mask, is_causal=True)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, VOCAB), labels.reshape(-1))
        return {"loss": loss, "logits": logits}


def training_function(config):
    torch.manual_seed(config["seed"])
    accelerator = Accelerator(cpu=True)
    train_ds = TokenBlocks(config["num_blocks"], seed=config["seed"])
    train_dataloader = DataLoader(train_ds, batch_size=config["batch_size"], shuffle=True)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=0.01)
    num_steps = config["num_epochs"] * len(train_dataloader)
    warmup = 20
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1.0 - s / num_steps))
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler)

    for epoch in range(config["num_epochs"]):
        s_epoch = time.time()
        model.train()
        loss_sum = torch.tensor(0.0)
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs["loss"]
                loss_sum += loss
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if step % 10 == 0:
                accelerator.print(f"[epoch {epoch} step {step}] loss: {loss.item():.4f}")
        e_epoch = time.time()
        accelerator.print(f"epoch {epoch}: avg train loss {loss_sum.item() / (step + 1):.4f} "
                          f"({e_epoch - s_epoch:.1f}s)")


if __name__ == "__main__":
    training_function({"lr": 1e-3, "num_epochs": 1, "seed": 42, "batch_size": 8, "num_blocks": 800})
