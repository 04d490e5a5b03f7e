"""Extractive QA fine-tuning (start/end span heads on a small Transformer
encoder), following the BERT SQuAD example trial: AdamW with a linear
schedule from transformers, hyperparameters kept in one config dict."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

hparams = {
    "learning_rate": 1e-3,
    "adam_epsilon": 1e-8,
    "weight_decay": 0.0,
    "num_warmup_steps": 0,
    "num_training_steps": 6,
    "max_seq_length": 32,
    "global_batch_size": 32,
    "num_epochs": 8,
    "max_grad_norm": 1.0,
}

VOCAB = 40
OPEN, CLOSE, PAD = 1, 2, 0


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda, last_epoch)


class SpanDataset(Dataset):
    """Token sequences with one answer span that runs from OPEN to CLOSE."""

    def __init__(self, n, seq_len, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, VOCAB, (n, seq_len), generator=g)
        self.start = torch.zeros(n, dtype=torch.long)
        self.end = torch.zeros(n, dtype=torch.long)
        for i in range(n):
            length = int(torch.randint(1, 6, (1,), generator=g))
            open_pos = int(torch.randint(0, seq_len - length - 1, (1,), generator=g))
            self.ids[i, open_pos] = OPEN
            self.ids[i, open_pos + length + 1] = CLOSE
            self.start[i] = open_pos
            self.end[i] = open_pos + length + 1

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return self.ids[i], self.start[i], self.end[i]


class SpanQAModel(nn.Module):
    def __init__(self, vocab, seq_len, d_model=48, nhead=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=96, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.qa_outputs = nn.Linear(d_model, 2)

    def forward(self, ids):
        pos = torch.arange(ids.size(1), device=ids.device)
        h = self.encoder(self.tok(ids) + self.pos(pos))
        start_logits, end_logits = self.qa_outputs(h).split(1, dim=-1)
        return start_logits.squeeze(-1), end_logits.squeeze(-1)


def evaluate(model, loader):
    model.eval()
    exact, total = 0, 0
    with torch.no_grad():
        for ids, start, end in loader:
            s, e = model(ids)
            exact += ((s.argmax(1) == start) & (e.argmax(1) == end)).sum().item()
            total += ids.size(0)
    return exact / total


def main():
    train_set = SpanDataset(768, hparams["max_seq_length"], seed=1)
    val_set = SpanDataset(256, hparams["max_seq_length"], seed=2)
    train_loader = DataLoader(train_set, batch_size=hparams["global_batch_size"], shuffle=True)
    val_loader = DataLoader(val_set, batch_size=128)

    model = SpanQAModel(VOCAB, hparams["max_seq_length"])
    no_decay = ["bias", "LayerNorm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": hparams["weight_decay"]},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=hparams["learning_rate"], eps=hparams["adam_epsilon"])
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=hparams["num_warmup_steps"], num_training_steps=hparams["num_training_steps"])

    step = 0
    for epoch in range(hparams["num_epochs"]):
        model.train()
        running, batches = 0.0, 0
        for ids, start, end in train_loader:
            start_logits, end_logits = model(ids)
            loss = (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) / 2
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), hparams["max_grad_norm"])
            optimizer.step()
            scheduler.step()
            step += 1
            running += loss.item()
            batches += 1
        em = evaluate(model, val_loader)
        print(f"epoch {epoch + 1} step {step}: train_loss {running / batches:.4f}  val_exact_match {em:.3f}")


if __name__ == "__main__":
    main()
