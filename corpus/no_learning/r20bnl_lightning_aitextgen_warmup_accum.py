"""Fine-tune a small GPT-style character model on a text file, aitextgen-style, with PyTorch Lightning.

TokenDataset cuts the encoded corpus into fixed-length blocks; ATGTransformer wraps the language
model in a LightningModule (AdamW with no weight decay on biases/LayerNorms and a linear warm-up /
decay schedule, as in aitextgen/train.py), and train() drives a Trainer with gradient accumulation
and a step budget.
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)


def build_corpus(n_lines, seed=0):
    rng = random.Random(seed)
    subjects = ["the keeper", "a sailor", "the old dog", "my sister", "the baker", "a stranger", "the captain"]
    verbs = ["walks to", "looks at", "sings about", "waits near", "paints", "remembers", "follows"]
    objects = ["the harbour", "the red door", "a quiet garden", "the lighthouse", "the market", "the hills"]
    times = ["at dawn", "every night", "in the rain", "after supper", "before the storm", "on sunday"]
    lines = []
    for _ in range(n_lines):
        lines.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(times)}.")
    return "\n".join(lines) + "\n"


class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        return [self.stoi[c] for c in text]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


class TokenDataset(Dataset):
    def __init__(self, text, tokenizer, block_size=64):
        ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        n_blocks = (len(ids) - 1) // block_size
        self.tokens = ids[: n_blocks * block_size + 1]
        self.block_size = block_size
        self.num_subsets = n_blocks

    def __len__(self):
        return self.num_subsets

    def __getitem__(self, item):
        start = item * self.block_size
        return self.tokens[start: start + self.block_size + 1]


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab_size, block_size=64, n_embd=64, n_layer=2, n_head=4):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((block_size, block_size), float("-inf")), diagonal=1))

    def forward(self, input_ids, labels=None):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.h:
            x = block(x, self.mask[:t, :t])
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        return logits, loss


class ATGTransformer(pl.LightningModule):
    def __init__(self, model, dataset, hparams):
        super().__init__()
        self.model, self.dataset = model, dataset
        self.save_hyperparameters(hparams)
        self.avg_loss = None
        self.last_loss = None

    def forward(self, inputs):
        return self.model(**inputs)

    def training_step(self, batch, batch_num):
        outputs = self({"input_ids": batch[:, :-1], "labels": batch[:, 1:]})
        loss = outputs[1]
        self.last_loss = loss.item()
        self.avg_loss = loss.item() if self.avg_loss is None else 0.98 * self.avg_loss + 0.02 * loss.item()
        return {"loss": loss}

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if batch_idx % (10 * self.hparams["gradient_accumulation_steps"]) == 0:
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            print(f"{self.global_step:4d} steps: Loss {self.last_loss:.3f} -- Avg {self.avg_loss:.3f} -- lr {lr:.2e}")

    def train_dataloader(self):
        return DataLoader(self.dataset, batch_size=self.hparams["batch_size"], shuffle=True,
                          pin_memory=False, num_workers=0)

    def configure_optimizers(self):
        "Prepare optimizer"

        no_decay = ["bias", "ln_"]
        optimizer_grouped_parameters = [
            {
                "params": [p for n, p in self.model.named_parameters() if not any(nd in n for nd in no_decay)],
                "weight_decay": self.hparams["weight_decay"],
            },
            {
                "params": [p for n, p in self.model.named_parameters() if any(nd in n for nd in no_decay)],
                "weight_decay": 0.0,
            },
        ]
        optimizer = AdamW(
            optimizer_grouped_parameters,
            lr=self.hparams["learning_rate"],
            eps=self.hparams["adam_epsilon"],
        )

        scheduler = get_linear_schedule_with_warmup(
            optimizer,
            num_warmup_steps=self.hparams["warmup_steps"],
            num_training_steps=self.hparams["num_steps"],
        )

        return [optimizer], [scheduler]


@torch.no_grad()
def generate(model, tokenizer, prompt, max_length=60):
    model.eval()
    ids = torch.tensor([tokenizer.encode(prompt)])
    for _ in range(max_length):
        logits, _ = model(ids[:, -64:])
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokenizer.decode(ids[0].tolist())


def train(model, dataset, tokenizer, learning_rate=1e-3, weight_decay=0.05, adam_epsilon=1e-8, max_grad_norm=0.5,
          warmup_steps=0, num_steps=5000, batch_size=8, gradient_accumulation_steps=1):
    hparams = dict(
        weight_decay=weight_decay,
        learning_rate=learning_rate,
        adam_epsilon=adam_epsilon,
        warmup_steps=warmup_steps,
        batch_size=batch_size,
        num_steps=num_steps,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    train_model = ATGTransformer(model, dataset, hparams)
    trainer = pl.Trainer(
        max_steps=num_steps,
        accumulate_grad_batches=gradient_accumulation_steps,
        gradient_clip_val=max_grad_norm,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(train_model)
    print(f"final Avg loss {train_model.avg_loss:.3f} (uniform over {tokenizer.vocab_size} chars: "
          f"{math.log(tokenizer.vocab_size):.3f})")


def main():
    pl.seed_everything(0)
    text = build_corpus(12000)
    tokenizer = CharTokenizer(text)
    dataset = TokenDataset(text, tokenizer, block_size=64)
    print(f"{len(text):,} characters, vocab {tokenizer.vocab_size}, {len(dataset):,} blocks of 64")
    model = TinyGPT(tokenizer.vocab_size)
    train(model, dataset, tokenizer, num_steps=100, warmup_steps=1, gradient_accumulation_steps=4,
          learning_rate=1e-3, batch_size=8)
    print("sample:", repr(generate(model, tokenizer, "the ")))


if __name__ == "__main__":
    main()
