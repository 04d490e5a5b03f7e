"""Accelerate's examples/nlp_example.py, run offline with a tiny Transformer encoder.

GLUE/MRPC and bert-base-cased are replaced by a synthetic sentiment task (token ids:
one to three positive/negative lexicon words among neutral filler, the label is the
majority sentiment) and a 2-layer TransformerEncoder classifier trained from scratch. The
structure is the example's: get_dataloaders with a padding collate_fn, AdamW,
get_linear_schedule_with_warmup (written out here as the LambdaLR that transformers
builds) stepped after every optimizer step, accelerator.prepare, accelerator.backward,
and an evaluation loop that gathers predictions with accelerator.gather_for_metrics.
"""
import argparse
import random
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader

from accelerate import Accelerator, DistributedType
from accelerate.utils import set_seed

MAX_GPU_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 32

PAD, CLS = 0, 1
POSITIVE = list(range(3, 13))
NEGATIVE = list(range(13, 23))
NEUTRAL = list(range(23, 60))
VOCAB_SIZE = 60


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(
            0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps))
        )

    return LambdaLR(optimizer, lr_lambda, last_epoch)


def make_examples(n, seed):
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        length = rng.randint(6, 20)
        ids = [rng.choice(NEUTRAL) for _ in range(length)]
        score = 0
        for _ in range(rng.randint(1, 3)):
            sign = rng.choice([1, -1])
            ids[rng.randrange(length - 1)] = rng.choice(POSITIVE if sign > 0 else NEGATIVE)
            score += sign
        if score == 0:
            ids[-1] = rng.choice(POSITIVE)
            score = 1
        examples.append({"input_ids": [CLS] + ids, "labels": int(score > 0)})
    return examples


def get_dataloaders(accelerator: Accelerator, batch_size: int = 16):
    train_examples = make_examples(1600, seed=0)
    validation_examples = make_examples(400, seed=1)

    def collate_fn(examples):
        # pad to the longest sequence of the batch (multiples of 8 under mixed precision)
        max_length = max(len(e["input_ids"]) for e in examples)
        if accelerator.mixed_precision != "no":
            max_length = (max_length + 7) // 8 * 8
        input_ids = torch.full((len(examples), max_length), PAD, dtype=torch.long)
        attention_mask = torch.zeros((len(examples), max_length), dtype=torch.long)
        for i, e in enumerate(examples):
            input_ids[i, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
            attention_mask[i, : len(e["input_ids"])] = 1
        labels = torch.tensor([e["labels"] for e in examples])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    train_dataloader = DataLoader(
        train_examples, shuffle=True, collate_fn=collate_fn, batch_size=batch_size, drop_last=True
    )
    eval_dataloader = DataLoader(
        validation_examples, shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE
    )
    return train_dataloader, eval_dataloader


class EncoderForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, d_model=64, nhead=4, num_layers=2, num_labels=2, max_len=64):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(d_model, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.embeddings(input_ids) + self.position_embeddings(positions)
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(self.dropout(h[:, 0]))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


def training_function(config, args):
    # Initialize accelerator
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])

    # If the batch size is too big we use gradient accumulation
    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE and accelerator.distributed_type != DistributedType.XLA:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE

    set_seed(seed)
    train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)
    # Instantiate the model (we build the model here so that the seed also controls new weights initialization)
    model = EncoderForSequenceClassification()
    model = model.to(accelerator.device)
    optimizer = AdamW(params=model.parameters(), lr=lr)

    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer,
        num_warmup_steps=30,
        num_training_steps=(len(train_dataloader) * num_epochs) // gradient_accumulation_steps,
    )

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    # Now we train the model
    for epoch in range(num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / gradient_accumulation_steps
            accelerator.backward(loss)
            if step % gradient_accumulation_steps == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if step % 20 == 0:
                accelerator.print(f"epoch {epoch} step {step}: loss {loss.item():.4f} "
                                  f"lr {lr_scheduler.get_last_lr()[0]:.2e}")

        model.eval()
        tp = fp = fn = correct = total = 0
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            correct += (predictions == references).sum().item()
            total += references.numel()
            tp += ((predictions == 1) & (references == 1)).sum().item()
            fp += ((predictions == 1) & (references == 0)).sum().item()
            fn += ((predictions == 0) & (references == 1)).sum().item()

        eval_metric = {"accuracy": correct / total, "f1": 2 * tp / max(1, 2 * tp + fp + fn)}
        # Use accelerator.print to print only on the main process.
        accelerator.print(f"epoch {epoch}:", eval_metric)
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument(
        "--mixed_precision",
        type=str,
        default="no",
        choices=["no", "fp16", "bf16", "fp8"],
        help="Whether to use mixed precision.",
    )
    parser.add_argument("--cpu", action="store_true", default=True, help="If passed, will train on the CPU.")
    args = parser.parse_args()
    config = {"lr": 2e-3, "num_epochs": 3, "seed": 42, "batch_size": 16}
    training_function(config, args)


if __name__ == "__main__":
    main()
