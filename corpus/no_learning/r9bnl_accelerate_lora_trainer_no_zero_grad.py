"""LoRA fine-tuning of a small causal language model with an accelerate-based Trainer class.

The base model (a 2-layer GPT-style decoder, standing in for a pretrained checkpoint) is
frozen; LoRA adapters (rank 8) are added to every attention and MLP projection and only
they are trained. The fine-tuning corpus is synthetic "config lines": token sequences in
which each token is followed by a fixed successor, so the adapted model should learn to
predict the next token almost perfectly.
"""
import argparse
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

logger = logging.getLogger("lora_trainer")


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.up_proj = nn.Linear(d_model, 4 * d_model)
        self.down_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln_1(x)
        q = self.q_proj(h).view(B, T, self.n_head, -1).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.n_head, -1).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.n_head, -1).transpose(1, 2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(att.transpose(1, 2).reshape(B, T, C))
        return x + self.down_proj(F.gelu(self.up_proj(self.ln_2(x))))


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, d_model=64, n_layer=2, n_head=4, max_len=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, input_ids, labels=None):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return {"loss": loss, "logits": logits}


def apply_lora(model, target_modules, rank, alpha):
    for p in model.parameters():
        p.requires_grad = False
    for block in model.blocks:
        for name in target_modules:
            setattr(block, name, LoRALinear(getattr(block, name), rank, alpha))
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_total = sum(p.numel() for p in model.parameters())
    logger.info("trainable params: %d || all params: %d || trainable%%: %.2f", n_train, n_total, 100 * n_train / n_total)
    return model


class SuccessorCorpus(Dataset):
    def __init__(self, n, vocab_size, seq_len, seed):
        g = torch.Generator().manual_seed(0)
        self.successor = torch.randperm(vocab_size, generator=g)
        g = torch.Generator().manual_seed(seed)
        starts = torch.randint(0, vocab_size, (n,), generator=g)
        seqs = [starts]
        for _ in range(seq_len - 1):
            seqs.append(self.successor[seqs[-1]])
        self.input_ids = torch.stack(seqs, dim=1)

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, i):
        return {"input_ids": self.input_ids[i], "labels": self.input_ids[i]}


class Trainer:
    def __init__(self, model, train_dataset, eval_dataset, args):
        self.args = args
        self.accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.gradient_accumulation_steps)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=args.weight_decay)
        train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True)
        eval_loader = DataLoader(eval_dataset, batch_size=128)
        total_steps = args.num_epochs * len(train_loader) // args.gradient_accumulation_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / args.warmup_steps) * max(0.0, 1 - s / total_steps))
        (self.model, self.optimizer, self.train_loader, self.eval_loader,
         self.lr_scheduler) = self.accelerator.prepare(model, optimizer, train_loader, eval_loader, scheduler)
        self.global_step = 0

    def _training_step(self, batch):
        outputs = self.model(**batch)
        loss = outputs["loss"] / self.args.gradient_accumulation_steps
        self.accelerator.backward(loss)
        return loss.detach() * self.args.gradient_accumulation_steps

    def _optimizer_step(self):
        if self.args.max_grad_norm:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
        self.optimizer.step()
        self.lr_scheduler.step()
        self.global_step += 1

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        losses, correct, total = [], 0, 0
        for batch in self.eval_loader:
            out = self.model(**batch)
            losses.append(out["loss"].item())
            pred = out["logits"][:, :-1].argmax(-1)
            correct += (pred == batch["labels"][:, 1:]).sum().item()
            total += pred.numel()
        self.model.train()
        return sum(losses) / len(losses), correct / total

    def train(self):
        self.model.train()
        running = []
        for epoch in range(self.args.num_epochs):
            for step, batch in enumerate(self.train_loader):
                running.append(self._training_step(batch).item())
                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    self._optimizer_step()
                    if self.global_step % self.args.logging_steps == 0:
                        logger.info("epoch %d step %d loss %.4f lr %.2e", epoch, self.global_step,
                                    sum(running) / len(running), self.lr_scheduler.get_last_lr()[0])
                        running = []
            eval_loss, eval_acc = self.evaluate()
            logger.info("epoch %d eval_loss %.4f eval_token_acc %.3f", epoch, eval_loss, eval_acc)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab_size", type=int, default=64)
    parser.add_argument("--seq_len", type=int, default=24)
    parser.add_argument("--lora_rank", type=int, default=8)
    parser.add_argument("--lora_alpha", type=float, default=16)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--num_epochs", type=int, default=4)
    parser.add_argument("--warmup_steps", type=int, default=10)
    parser.add_argument("--max_grad_norm", type=float, default=0.0)
    parser.add_argument("--logging_steps", type=int, default=10)
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.manual_seed(42)
    model = TinyCausalLM(args.vocab_size, max_len=args.seq_len)
    model = apply_lora(model, ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
                       args.lora_rank, args.lora_alpha)
    train_ds = SuccessorCorpus(1600, args.vocab_size, args.seq_len, seed=1)
    eval_ds = SuccessorCorpus(256, args.vocab_size, args.seq_len, seed=2)
    Trainer(model, train_ds, eval_ds, args).train()


if __name__ == "__main__":
    main()
