"""Train a small GPT-2 style character language model on a raw text corpus
(GPT2-Chinese style train.py: tokenized corpus cut into pieces, AdamW with a
linear warmup schedule, loss logged every few steps)."""
import argparse
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR


class WarmupLinearSchedule(LambdaLR):
    """Linear warmup from 0 to 1 over `warmup_steps`, then linear decay to 0 at `t_total`."""

    def __init__(self, optimizer, warmup_steps, t_total, last_epoch=-1):
        self.warmup_steps = warmup_steps
        self.t_total = t_total
        super().__init__(optimizer, self.lr_lambda, last_epoch=last_epoch)

    def lr_lambda(self, step):
        if step < self.warmup_steps:
            return float(step) / float(max(1, self.warmup_steps))
        return max(0.0, float(self.t_total - step) / float(max(1.0, self.t_total - self.warmup_steps)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, mask):
        h = self.ln_1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab_size, n_ctx=64, n_embd=128, n_layer=2, n_head=4):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_ctx, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()

    def forward(self, input_ids, labels=None):
        t = input_ids.size(1)
        pos = torch.arange(t, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for block in self.h:
            x = block(x, mask)
        logits = self.lm_head(self.ln_f(x))
        if labels is None:
            return logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return loss, logits


def build_corpus(rng):
    subjects = ["the cat", "a dog", "my friend", "the teacher", "our neighbour", "the old man"]
    verbs = ["reads", "likes", "walks to", "looks at", "writes about", "talks about"]
    objects = ["the river", "a small house", "the red book", "the market", "a long letter", "the garden"]
    lines = []
    for _ in range(600):
        lines.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--epochs', default=2, type=int)
    parser.add_argument('--batch_size', default=8, type=int)
    parser.add_argument('--lr', default=1.5e-4, type=float)
    parser.add_argument('--warmup_steps', default=2000, type=int)
    parser.add_argument('--log_step', default=10, type=int)
    parser.add_argument('--n_ctx', default=64, type=int)
    parser.add_argument('--stride', default=48, type=int)
    parser.add_argument('--gradient_accumulation', default=1, type=int)
    parser.add_argument('--max_grad_norm', default=1.0, type=float)
    args = parser.parse_args()

    random.seed(0)
    torch.manual_seed(0)

    raw_text = build_corpus(random.Random(0))
    vocab = sorted(set(raw_text))
    stoi = {c: i for i, c in enumerate(vocab)}
    tokens = [stoi[c] for c in raw_text]
    print('vocab size', len(vocab), 'tokens', len(tokens))

    samples = []
    start = 0
    while start + args.n_ctx <= len(tokens):
        samples.append(tokens[start:start + args.n_ctx])
        start += args.stride

    model = GPT2LMHeadModel(len(vocab), n_ctx=args.n_ctx)
    model.train()
    num_parameters = sum(p.numel() for p in model.parameters())
    print('number of parameters: {}'.format(num_parameters))

    total_steps = int(len(samples) * args.epochs / args.batch_size / args.gradient_accumulation)
    print('total steps = {}'.format(total_steps))

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    scheduler = WarmupLinearSchedule(optimizer, warmup_steps=args.warmup_steps, t_total=total_steps)

    print('starting training')
    overall_step = 0
    running_loss = 0
    for epoch in range(args.epochs):
        random.shuffle(samples)
        for step in range(len(samples) // args.batch_size):
            batch = samples[step * args.batch_size:(step + 1) * args.batch_size]
            batch_inputs = torch.tensor(batch, dtype=torch.long)

            loss, logits = model(batch_inputs, labels=batch_inputs)
            loss = loss / args.gradient_accumulation
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)

            running_loss += loss.item()
            if (step + 1) % args.gradient_accumulation == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
                overall_step += 1
                if overall_step % args.log_step == 0:
                    print('step {} of epoch {}, loss {:.4f}, lr {:.2e}'.format(
                        step + 1, epoch + 1, running_loss * args.gradient_accumulation / args.log_step,
                        scheduler.get_last_lr()[0]))
                    running_loss = 0
        print('epoch {} finished'.format(epoch + 1))
    print('uniform loss would be {:.4f}'.format(math.log(len(vocab))))


if __name__ == '__main__':
    main()
