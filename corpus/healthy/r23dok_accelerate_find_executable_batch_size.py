"""Accelerate's examples/by_feature/memory.py (find_executable_batch_size), run offline.

GLUE/MRPC and bert-base-cased are replaced by a synthetic paraphrase task (sentence pairs of
token ids; label 1 when sentence2 is a shuffled copy of sentence1 with a couple of tokens
swapped for synonyms, 0 when it is another sentence sharing half of sentence1's tokens) and a small pair encoder trained from
scratch. As in the example, the whole training loop lives in an inner function decorated with
@find_executable_batch_size(starting_batch_size=...), which builds the dataloaders and the
scheduler and calls accelerator.prepare inside it (model and optimizer are nonlocal); a
batch_size above MAX_GPU_BATCH_SIZE is turned into gradient accumulation (loss divided by the
accumulation steps, optimizer.step() when step % gradient_accumulation_steps == 0), and a
linear schedule with warm-up is stepped with the optimizer.
"""
import argparse
import random

import torch
import torch.nn as nn
from torch.optim import AdamW
from torch.utils.data import DataLoader, Dataset

from accelerate import Accelerator
from accelerate.utils import find_executable_batch_size, set_seed

MAX_GPU_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 64
VOCAB = 201
PAD = 0


class PairDataset(Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        synonyms = {t: (t + 100 if t <= 100 else t - 100) for t in range(1, VOCAB)}
        self.examples = []
        for _ in range(n):
            length = rng.randint(6, 14)
            s1 = [rng.randint(1, VOCAB - 1) for _ in range(length)]
            if rng.random() < 0.5:
                s2 = s1[:]
                rng.shuffle(s2)
                for _ in range(4):
                    j = rng.randrange(len(s2))
                    s2[j] = synonyms[s2[j]]
                label = 1
            else:
                s2 = [rng.randint(1, VOCAB - 1) for _ in range(rng.randint(6, 14))]
                keep = rng.sample(s1, k=len(s1) // 2)
                s2[: len(keep)] = keep
                label = 0
            self.examples.append((s1, s2, label))

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        return self.examples[idx]


def collate_fn(examples):
    def pad(seqs):
        longest = max(len(s) for s in seqs)
        return torch.tensor([s + [PAD] * (longest - len(s)) for s in seqs])

    return {
        "input_ids_a": pad([e[0] for e in examples]),
        "input_ids_b": pad([e[1] for e in examples]),
        "labels": torch.tensor([e[2] for e in examples]),
    }


def get_dataloaders(accelerator, batch_size=16):
    train_dataloader = DataLoader(PairDataset(2048, seed=1), shuffle=True, collate_fn=collate_fn, batch_size=batch_size)
    eval_dataloader = DataLoader(PairDataset(512, seed=2), shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE)
    return train_dataloader, eval_dataloader


class PairClassifier(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.classifier = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, 2))
        self.loss_fct = nn.CrossEntropyLoss()

    def encode(self, ids):
        mask = (ids != PAD).unsqueeze(-1).float()
        pooled = (self.embed(ids) * mask).sum(1) / mask.sum(1)
        return self.encoder(pooled)

    def forward(self, input_ids_a, input_ids_b, labels=None):
        a, b = self.encode(input_ids_a), self.encode(input_ids_b)
        logits = self.classifier(torch.cat([(a - b).abs(), a * b], dim=-1))
        loss = self.loss_fct(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])

    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE

    set_seed(seed)
    model = PairClassifier()
    model = model.to(accelerator.device)
    optimizer = AdamW(params=model.parameters(), lr=lr)

    @find_executable_batch_size(starting_batch_size=batch_size)
    def inner_training_loop(batch_size):
        nonlocal model, optimizer
        train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)

        lr_scheduler = get_linear_schedule_with_warmup(
            optimizer=optimizer,
            num_warmup_steps=10,
            num_training_steps=(len(train_dataloader) * num_epochs) // gradient_accumulation_steps,
        )

        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
            model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
        )

        for epoch in range(num_epochs):
            model.train()
            total = 0.0
            for step, batch in enumerate(train_dataloader):
                outputs = model(**batch)
                loss = outputs["loss"]
                total += loss.item()
                loss = loss / gradient_accumulation_steps
                accelerator.backward(loss)
                if step % gradient_accumulation_steps == 0:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                if step % 32 == 0:
                    accelerator.print(f"epoch {epoch} step {step}: loss {loss.item() * gradient_accumulation_steps:.4f}")

            model.eval()
            correct, seen = 0, 0
            for step, batch in enumerate(eval_dataloader):
                with torch.no_grad():
                    outputs = model(**batch)
                predictions = outputs["logits"].argmax(dim=-1)
                predictions, references = accelerator.gather((predictions, batch["labels"]))
                correct += (predictions == references).sum().item()
                seen += references.numel()
            accelerator.print(
                f"epoch {epoch}: batch_size {batch_size} train_loss {total / len(train_dataloader):.4f} "
                f"{{'accuracy': {correct / seen:.4f}}}"
            )

    inner_training_loop()


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--cpu", action="store_true", help="If passed, will train on the CPU.")
    args = parser.parse_args()
    args.cpu = True
    config = {"lr": 2e-3, "num_epochs": 3, "seed": 42, "batch_size": 32}
    training_function(config, args)


if __name__ == "__main__":
    main()
