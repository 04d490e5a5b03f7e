"""Sentence classification with a small Transformer encoder, organised like the transformers
examples' lightning_base.BaseTransformer: AdamW with grouped weight decay in
configure_optimizers, and a linear warm-up/decay schedule built in train_dataloader once the
number of training steps is known.

The reviews are generated here: token sequences over a 200-word vocabulary where some words
carry positive and some negative sentiment; the label is the sign of the sentiment balance.
"""
import argparse
import math

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ_LEN, PAD, CLS = 200, 24, 0, 1
POSITIVE = torch.arange(10, 30)
NEGATIVE = torch.arange(30, 50)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) /
                   float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda, last_epoch)


def get_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(50, VOCAB, (n, SEQ_LEN), generator=g)
    n_pos = torch.randint(0, 6, (n,), generator=g)
    n_neg = torch.randint(0, 6, (n,), generator=g)
    n_neg = torch.where(n_neg == n_pos, (n_neg + 1) % 6, n_neg)
    for i in range(n):
        slots = torch.randperm(SEQ_LEN - 1, generator=g)[: n_pos[i] + n_neg[i]] + 1
        words = torch.cat([POSITIVE[torch.randint(0, 20, (int(n_pos[i]),), generator=g)],
                           NEGATIVE[torch.randint(0, 20, (int(n_neg[i]),), generator=g)]])
        ids[i, slots] = words
    ids[:, 0] = CLS
    labels = (n_pos > n_neg).long()
    return TensorDataset(ids, labels)


class TinyEncoderClassifier(nn.Module):
    def __init__(self, d_model=64, n_heads=4, n_layers=2, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.position_embeddings = nn.Parameter(torch.randn(1, SEQ_LEN, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=2 * d_model, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.LayerNorm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, num_labels)

    def forward(self, input_ids):
        h = self.embeddings(input_ids) + self.position_embeddings
        h = self.LayerNorm(self.encoder(h))
        return self.classifier(h[:, 0])


class BaseTransformer(pl.LightningModule):
    def __init__(self, hparams):
        super().__init__()
        self.save_hyperparameters(vars(hparams))
        self.model = TinyEncoderClassifier()
        self.val_outputs = []

    def forward(self, input_ids):
        return self.model(input_ids)

    def configure_optimizers(self):
        model = self.model
        no_decay = ["bias", "LayerNorm.weight"]
        optimizer_grouped_parameters = [
            {
                "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
                "weight_decay": self.hparams.weight_decay,
            },
            {
                "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
                "weight_decay": 0.0,
            },
        ]
        optimizer = AdamW(optimizer_grouped_parameters, lr=self.hparams.learning_rate, eps=self.hparams.adam_epsilon)
        self.opt = optimizer
        return [optimizer]

    def training_step(self, batch, batch_idx):
        input_ids, labels = batch
        logits = self(input_ids)
        loss = F.cross_entropy(logits, labels)
        if self.global_step % 25 == 0:
            print(f"step {self.global_step:4d} loss {loss.item():.4f} lr {self.opt.param_groups[0]['lr']:.2e}")
        return loss

    def validation_step(self, batch, batch_idx):
        input_ids, labels = batch
        logits = self(input_ids)
        self.val_outputs.append((F.cross_entropy(logits, labels, reduction="sum").item(),
                                 (logits.argmax(-1) == labels).sum().item(), len(labels)))

    def on_validation_epoch_end(self):
        loss = sum(o[0] for o in self.val_outputs)
        correct = sum(o[1] for o in self.val_outputs)
        n = sum(o[2] for o in self.val_outputs)
        self.val_outputs.clear()
        if not self.trainer.sanity_checking:
            print(f"epoch {self.current_epoch} val_loss {loss / n:.4f} val_acc {correct / n:.3f}")

    def train_dataloader(self):
        train_dataset = get_dataset(1600, seed=1)
        dataloader = DataLoader(train_dataset, batch_size=self.hparams.train_batch_size, drop_last=True,
                                shuffle=True)
        t_total = (
            (len(dataloader.dataset) // (self.hparams.train_batch_size * max(1, self.hparams.n_gpu)))
            // self.hparams.gradient_accumulation_steps
            * float(self.hparams.num_train_epochs)
        )
        scheduler = get_linear_schedule_with_warmup(
            self.opt, num_warmup_steps=self.hparams.warmup_steps, num_training_steps=t_total
        )
        self.lr_scheduler = scheduler
        return dataloader

    def val_dataloader(self):
        return DataLoader(get_dataset(400, seed=2), batch_size=self.hparams.eval_batch_size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", default=5e-4, type=float)
    parser.add_argument("--weight_decay", default=0.0, type=float)
    parser.add_argument("--adam_epsilon", default=1e-8, type=float)
    parser.add_argument("--warmup_steps", default=20, type=int)
    parser.add_argument("--num_train_epochs", default=4, type=int)
    parser.add_argument("--train_batch_size", default=32, type=int)
    parser.add_argument("--eval_batch_size", default=200, type=int)
    parser.add_argument("--gradient_accumulation_steps", default=1, type=int)
    parser.add_argument("--n_gpu", default=0, type=int)
    parser.add_argument("--seed", default=42, type=int)
    args = parser.parse_args()

    pl.seed_everything(args.seed)
    model = BaseTransformer(args)
    trainer = pl.Trainer(
        max_epochs=args.num_train_epochs,
        accumulate_grad_batches=args.gradient_accumulation_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
