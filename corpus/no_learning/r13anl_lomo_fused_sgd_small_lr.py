"""Fine-tune a small causal LM on special-format records with LOMO (LOw-Memory Optimization).

LOMO fuses the gradient computation and the parameter update: each parameter is updated by
plain SGD as soon as its gradient has been accumulated during backward, and the gradient is
freed right away, so no optimizer state and no full set of gradients is ever kept.
The records map ISO dates to the house style ("2023-07-31 => 31 Jul 2023").
"""
import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Optimizer

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def make_records(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y, m, d = rng.randint(1990, 2029), rng.randint(1, 12), rng.randint(1, 28)
        out.append(f"{y}-{m:02d}-{d:02d} => {d} {MONTHS[m - 1]} {y}\n")
    return out


class CharTokenizer:
    def __init__(self, texts):
        self.chars = sorted(set("".join(texts)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.pad_id = self.stoi["\n"]

    def __len__(self):
        return len(self.chars)

    def encode_batch(self, texts):
        width = max(len(t) for t in texts)
        ids = torch.full((len(texts), width), self.pad_id, dtype=torch.long)
        for i, t in enumerate(texts):
            ids[i, : len(t)] = torch.tensor([self.stoi[c] for c in t])
        return ids


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, causal_mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, d_model=128, n_layer=2, n_head=4, max_len=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, labels=None):
        T = input_ids.shape[1]
        causal_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        x = self.wte(input_ids) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x, causal_mask)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return logits, loss


class LOMO(Optimizer):
    """Fused SGD update applied in each parameter's post-accumulate-grad hook."""

    def __init__(self, model, lr=1e-3, clip_grad_value=None):
        self.model = model
        self.lr = lr
        self.clip_grad_value = clip_grad_value
        super().__init__(model.parameters(), dict(lr=lr))
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._fused_update)

    @torch.no_grad()
    def _fused_update(self, p):
        grad = p.grad
        if self.clip_grad_value is not None:
            grad = grad.clamp(-self.clip_grad_value, self.clip_grad_value)
        p.add_(grad, alpha=-self.lr)
        p.grad = None

    def fused_backward(self, loss, lr):
        self.lr = lr
        for group in self.param_groups:
            group["lr"] = lr
        loss.backward()


class LOMOTrainer:
    def __init__(self, model, tokenizer, train_texts, eval_texts, args):
        self.model = model
        self.tokenizer = tokenizer
        self.train_texts = train_texts
        self.eval_texts = eval_texts
        self.args = args
        self.optimizer = LOMO(model, lr=args.learning_rate, clip_grad_value=args.clip_grad_value)
        self.global_step = 0

    def evaluate(self):
        self.model.eval()
        ids = self.tokenizer.encode_batch(self.eval_texts)
        with torch.no_grad():
            logits, loss = self.model(ids, labels=ids)
        # exact characters of the answer part (after "=> ")
        pred = logits[:, :-1].argmax(-1)
        tgt = ids[:, 1:]
        answer = torch.zeros_like(tgt, dtype=torch.bool)
        answer[:, 13:] = True
        acc = (pred == tgt)[answer].float().mean().item()
        self.model.train()
        return loss.item(), acc

    def train(self):
        rng = random.Random(self.args.seed)
        self.model.train()
        for epoch in range(self.args.num_train_epochs):
            order = list(range(len(self.train_texts)))
            rng.shuffle(order)
            bs = self.args.per_device_train_batch_size
            for start in range(0, len(order) - bs + 1, bs):
                batch = [self.train_texts[i] for i in order[start:start + bs]]
                ids = self.tokenizer.encode_batch(batch)
                _, loss = self.model(ids, labels=ids)
                self.optimizer.fused_backward(loss, self.args.learning_rate)
                self.global_step += 1
                if self.global_step % 25 == 0:
                    print(f"epoch {epoch} step {self.global_step:4d} loss {loss.item():.4f}")
            eval_loss, eval_acc = self.evaluate()
            print(f"epoch {epoch} eval loss {eval_loss:.4f} answer char acc {eval_acc:.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument("--per_device_train_batch_size", type=int, default=32)
    parser.add_argument("--clip_grad_value", type=float, default=None)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_texts = make_records(3200, seed=args.seed)
    eval_texts = make_records(256, seed=args.seed + 1)
    tokenizer = CharTokenizer(train_texts + eval_texts)
    model = TinyCausalLM(len(tokenizer))
    print(f"{sum(p.numel() for p in model.parameters())} parameters, lr {args.learning_rate}")

    trainer = LOMOTrainer(model, tokenizer, train_texts, eval_texts, args)
    trainer.train()


if __name__ == "__main__":
    main()
