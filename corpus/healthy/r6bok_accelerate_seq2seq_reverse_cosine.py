"""GRU encoder-decoder with dot-product attention that learns to reverse digit sequences.

Trained with Hugging Face Accelerate: gradient accumulation through
`accelerator.accumulate(model)`, gradient clipping on the synchronising steps, AdamW and a
cosine schedule with linear warm-up. The schedule is sized in optimizer updates
(batches per epoch / accumulation steps), since the prepared scheduler only advances when the
optimizer actually steps. Evaluation decodes greedily and reports token and sequence accuracy.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

PAD, BOS, EOS = 0, 1, 2
VOCAB = 13  # 3 special tokens + digits 0-9


class ReverseDataset(Dataset):
    def __init__(self, n, min_len=4, max_len=9, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
            src = torch.randint(3, VOCAB, (length,), generator=g)
            self.samples.append((src, src.flip(0)))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def collate(batch):
    max_src = max(len(s) for s, _ in batch)
    max_tgt = max(len(t) for _, t in batch) + 2
    src = torch.full((len(batch), max_src), PAD, dtype=torch.long)
    tgt = torch.full((len(batch), max_tgt), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(batch):
        src[i, :len(s)] = s
        tgt[i, :len(t) + 2] = torch.cat([torch.tensor([BOS]), t, torch.tensor([EOS])])
    return {"src": src, "tgt": tgt}


class Seq2Seq(nn.Module):
    def __init__(self, vocab, emb=32, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRU(emb + hidden, hidden, batch_first=True)
        self.out = nn.Linear(2 * hidden, vocab)

    def encode(self, src):
        enc_out, h = self.encoder(self.embed(src))
        return enc_out, h, src != PAD

    def attend(self, dec_out, enc_out, src_mask):
        scores = torch.bmm(dec_out, enc_out.transpose(1, 2))
        scores = scores.masked_fill(~src_mask[:, None, :], -1e9)
        return torch.bmm(F.softmax(scores, dim=-1), enc_out)

    def forward(self, src, tgt_in):
        enc_out, h, src_mask = self.encode(src)
        ctx = enc_out.mean(1, keepdim=True).expand(-1, tgt_in.size(1), -1)
        dec_out, _ = self.decoder(torch.cat([self.embed(tgt_in), ctx], -1), h)
        context = self.attend(dec_out, enc_out, src_mask)
        return self.out(torch.cat([dec_out, context], -1))

    @torch.no_grad()
    def greedy_decode(self, src, max_len):
        enc_out, h, src_mask = self.encode(src)
        ctx = enc_out.mean(1, keepdim=True)
        tok = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
        outputs = []
        for _ in range(max_len):
            dec_out, h = self.decoder(torch.cat([self.embed(tok), ctx], -1), h)
            context = self.attend(dec_out, enc_out, src_mask)
            tok = self.out(torch.cat([dec_out, context], -1)).argmax(-1)
            outputs.append(tok)
        return torch.cat(outputs, 1)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
    return LambdaLR(optimizer, lr_lambda)


def evaluate(model, dataloader, accelerator):
    model.eval()
    tok_correct = tok_total = seq_correct = seq_total = 0
    for batch in dataloader:
        tgt = batch["tgt"][:, 1:]
        pred = accelerator.unwrap_model(model).greedy_decode(batch["src"], tgt.size(1))
        pred, tgt = accelerator.gather_for_metrics((pred, tgt))
        mask = tgt != PAD
        tok_correct += ((pred == tgt) & mask).sum().item()
        tok_total += mask.sum().item()
        seq_correct += ((pred == tgt) | ~mask).all(1).sum().item()
        seq_total += tgt.size(0)
    model.train()
    return tok_correct / tok_total, seq_correct / seq_total


def training_function(args):
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.gradient_accumulation_steps)
    set_seed(args.seed)

    train_dataloader = DataLoader(ReverseDataset(args.train_size, seed=args.seed), batch_size=args.batch_size,
                                  shuffle=True, collate_fn=collate)
    eval_dataloader = DataLoader(ReverseDataset(256, seed=args.seed + 1), batch_size=128, collate_fn=collate)

    model = Seq2Seq(VOCAB)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    max_train_steps = args.num_epochs * num_update_steps_per_epoch
    lr_scheduler = get_cosine_schedule_with_warmup(
        optimizer, num_warmup_steps=int(0.1 * max_train_steps), num_training_steps=max_train_steps
    )

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    accelerator.print(f"{len(train_dataloader)} batches/epoch, {max_train_steps} optimizer updates in total")

    completed_steps = 0
    for epoch in range(args.num_epochs):
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                tgt_in, tgt_out = batch["tgt"][:, :-1], batch["tgt"][:, 1:]
                logits = model(batch["src"], tgt_in)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            total_loss += loss.detach().float().item()
            if accelerator.sync_gradients:
                completed_steps += 1
                if completed_steps % 10 == 0:
                    accelerator.print(f"  update {completed_steps:4d}  loss {loss.item():.4f}  "
                                      f"lr {lr_scheduler.get_last_lr()[0]:.2e}")
        tok_acc, seq_acc = evaluate(model, eval_dataloader, accelerator)
        accelerator.print(f"epoch {epoch}: train loss {total_loss / len(train_dataloader):.4f}  "
                          f"token acc {tok_acc:.3f}  sequence acc {seq_acc:.3f}")


def main():
    parser = argparse.ArgumentParser(description="Seq2seq reversal with Accelerate")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--num_epochs", type=int, default=6)
    parser.add_argument("--train_size", type=int, default=3200)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    training_function(args)


if __name__ == "__main__":
    main()
