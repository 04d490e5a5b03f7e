"""K-fold cross-validation of a sentence-pair classifier with Accelerate, following accelerate's
examples/by_feature/cross_validation.py (itself built on nlp_example.py).

GLUE MRPC and bert-base-cased are replaced by synthetic two-sentence review-polarity pairs and a small
Transformer encoder trained from scratch: [CLS] s1 [SEP] s2 [SEP] with token-type ids and an
attention mask, padded per batch. For every stratified fold a fresh model, optimizer and linear
warm-up schedule are built, trained and evaluated on the held-out fold; the test-set logits of the
folds are averaged at the end.
"""
import argparse
import math
from typing import List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator, DistributedType
from accelerate.utils import set_seed
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset, Subset

MAX_GPU_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 32

PAD, CLS, SEP = 0, 1, 2
N_POSITIVE, N_NEGATIVE, N_NEUTRAL = 8, 8, 24
VOCAB_SIZE = 3 + N_POSITIVE + N_NEGATIVE + N_NEUTRAL


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(
            0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps))
        )

    return LambdaLR(optimizer, lr_lambda, last_epoch)


class ReviewPairs(Dataset):
    """Two-sentence 'reviews' over a vocabulary of positive, negative and neutral words; about 40%
    of the words are polar, and 75% of those agree with the review's label (1 = positive)."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.examples = []
        for _ in range(n):
            label = int(rng.random() < 0.5)
            self.examples.append({
                "sentence1": self._sentence(rng, label),
                "sentence2": self._sentence(rng, label),
                "label": label,
            })
        self.labels = [e["label"] for e in self.examples]

    @staticmethod
    def _sentence(rng, label):
        length = int(rng.integers(4, 9))
        words = 3 + N_POSITIVE + N_NEGATIVE + rng.integers(0, N_NEUTRAL, size=length)
        for i in np.flatnonzero(rng.random(length) < 0.4):
            positive = (rng.random() < 0.75) == bool(label)
            words[i] = 3 + (0 if positive else N_POSITIVE) + rng.integers(0, N_POSITIVE)
        return words.tolist()

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        e = self.examples[idx]
        input_ids = [CLS] + e["sentence1"] + [SEP] + e["sentence2"] + [SEP]
        token_type_ids = [0] * (len(e["sentence1"]) + 2) + [1] * (len(e["sentence2"]) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "labels": e["label"]}


def stratified_kfold(labels, n_splits):
    """Same splits as sklearn's StratifiedKFold(n_splits) without shuffling, for 2 classes."""
    labels = np.asarray(labels)
    fold_of = np.empty(len(labels), dtype=int)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        for k, chunk in enumerate(np.array_split(idx, n_splits)):
            fold_of[chunk] = k
    for k in range(n_splits):
        yield np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k)


class SequenceClassifierOutput(dict):
    def __getattr__(self, name):
        return self[name]


class TinyBertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, hidden_size=64, num_layers=1, num_heads=4, max_len=32, num_labels=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(max_len, hidden_size)
        self.token_type_embeddings = nn.Embedding(2, hidden_size)
        self.embed_norm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, attention_mask, token_type_ids, labels=None):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.word_embeddings(input_ids) + self.position_embeddings(positions) + self.token_type_embeddings(token_type_ids)
        h = self.encoder(self.embed_norm(h), src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(self.dropout(self.pooler(h[:, 0])))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def get_fold_dataloaders(
    accelerator: Accelerator, datasets, train_idxs: List[int], valid_idxs: List[int], batch_size: int = 16
):
    splits = {
        "train": Subset(datasets["train"], train_idxs),
        "validation": Subset(datasets["train"], valid_idxs),
        "test": datasets["validation"],
    }

    def collate_fn(examples):
        # On TPU it's best to pad everything to the same length or training will be very slow.
        if accelerator.distributed_type == DistributedType.XLA:
            max_length = 32
        else:
            max_length = max(len(e["input_ids"]) for e in examples)
        batch = {
            "input_ids": torch.full((len(examples), max_length), PAD, dtype=torch.long),
            "token_type_ids": torch.zeros(len(examples), max_length, dtype=torch.long),
            "attention_mask": torch.zeros(len(examples), max_length, dtype=torch.long),
            "labels": torch.tensor([e["labels"] for e in examples]),
        }
        for i, e in enumerate(examples):
            n = len(e["input_ids"])
            batch["input_ids"][i, :n] = torch.tensor(e["input_ids"])
            batch["token_type_ids"][i, :n] = torch.tensor(e["token_type_ids"])
            batch["attention_mask"][i, :n] = 1
        return batch

    train_dataloader = DataLoader(splits["train"], shuffle=True, collate_fn=collate_fn, batch_size=batch_size)
    eval_dataloader = DataLoader(splits["validation"], shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE)
    test_dataloader = DataLoader(splits["test"], shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE)
    return train_dataloader, eval_dataloader, test_dataloader


def accuracy_and_f1(predictions, references):
    predictions, references = np.asarray(predictions), np.asarray(references)
    tp = int(((predictions == 1) & (references == 1)).sum())
    fp = int(((predictions == 1) & (references == 0)).sum())
    fn = int(((predictions == 0) & (references == 1)).sum())
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    return {"accuracy": float((predictions == references).mean()), "f1": f1}


def training_function(config, args):
    test_predictions = []
    datasets = {"train": ReviewPairs(960, seed=0), "validation": ReviewPairs(400, seed=1)}
    test_labels = datasets["validation"].labels
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])

    # If the batch size is too big we use gradient accumulation
    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE

    set_seed(seed)

    folds = stratified_kfold(datasets["train"].labels, int(args.num_folds))

    for fold, (train_idxs, valid_idxs) in enumerate(folds):
        train_dataloader, eval_dataloader, test_dataloader = get_fold_dataloaders(
            accelerator, datasets, train_idxs, valid_idxs, batch_size
        )
        # Instantiate the model (we build the model here so that the seed also control new weights initialization)
        model = TinyBertForSequenceClassification()
        model = model.to(accelerator.device)

        optimizer = AdamW(params=model.parameters(), lr=lr)
        lr_scheduler = get_linear_schedule_with_warmup(
            optimizer=optimizer,
            num_warmup_steps=config["num_warmup_steps"],
            num_training_steps=(len(train_dataloader) * num_epochs) // gradient_accumulation_steps,
        )

        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
            model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
        )

        for epoch in range(num_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                outputs = model(**batch)
                loss = outputs.loss
                if step % 10 == 0:
                    accelerator.print(f"fold {fold} epoch {epoch} step {step:2d} loss {loss.item():.4f} "
                                      f"lr {lr_scheduler.get_last_lr()[0]:.2e}")
                loss = loss / gradient_accumulation_steps
                accelerator.backward(loss)
                if step % gradient_accumulation_steps == 0:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()

            model.eval()
            all_predictions, all_references = [], []
            for step, batch in enumerate(eval_dataloader):
                with torch.no_grad():
                    outputs = model(**batch)
                predictions = outputs.logits.argmax(dim=-1)
                predictions, references = accelerator.gather((predictions, batch["labels"]))
                all_predictions.append(predictions.cpu())
                all_references.append(references.cpu())

            eval_metric = accuracy_and_f1(torch.cat(all_predictions), torch.cat(all_references))
            accelerator.print(f"fold {fold} epoch {epoch}:", eval_metric)

        # We also run predictions on the test set at the very end
        fold_predictions = []
        for step, batch in enumerate(test_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits
            predictions, references = accelerator.gather((predictions, batch["labels"]))
            fold_predictions.append(predictions.cpu())
        fold_logits = torch.cat(fold_predictions, dim=0)
        accelerator.print(f"fold {fold} test:", accuracy_and_f1(fold_logits.argmax(dim=-1), test_labels))
        test_predictions.append(fold_logits)
        # We now need to release all our memory and get rid of the current model, optimizer, etc
        accelerator.free_memory()

    # Finally we check the accuracy of our folded results:
    preds = torch.stack(test_predictions, dim=0).sum(dim=0).div(int(args.num_folds)).argmax(dim=-1)
    test_metric = accuracy_and_f1(preds, test_labels)
    accelerator.print("Average test metrics from all folds:", test_metric)


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--cpu", action="store_true", default=True, help="If passed, will train on the CPU.")
    parser.add_argument("--num_folds", type=int, default=3, help="The number of splits to perform across the dataset")
    args = parser.parse_args()
    config = {"lr": 2e-3, "num_epochs": 4, "seed": 42, "batch_size": 32, "num_warmup_steps": 10}
    training_function(config, args)


if __name__ == "__main__":
    main()
