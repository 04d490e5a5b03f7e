#!/usr/bin/env python
"""Masked language modelling with accelerate, after transformers'
examples/pytorch/language-modeling/run_mlm_no_trainer.py.

transformers and datasets are not installed here, so the pieces the script takes from them are
written below: a tiny BERT-style encoder (BertForMaskedLM-like, with a `LayerNorm` naming so the
script's no_decay list applies), DataCollatorForLanguageModeling (15% of tokens chosen, 80% [MASK]
/ 10% random / 10% kept, labels -100 elsewhere), get_scheduler("linear"), and a corpus of
synthetic "sentences" drawn from a sparse Markov chain over a 60-word vocabulary and grouped into
blocks of 32 tokens (group_texts). The argument parsing, the no_decay parameter groups, the
Accelerator with gradient accumulation, the completed_steps bookkeeping and the perplexity
evaluation follow the original.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed

logger = get_logger(__name__)

PAD, CLS, SEP, MASK = 0, 1, 2, 3
N_SPECIAL = 4


def parse_args():
    parser = argparse.ArgumentParser(description="Finetune a transformers model on a Masked Language Modeling task")
    parser.add_argument("--vocab_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--per_device_train_batch_size", type=int, default=32)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--num_train_epochs", type=int, default=4)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=3)
    parser.add_argument("--lr_scheduler_type", type=str, default="linear")
    parser.add_argument("--num_warmup_steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--mlm_probability", type=float, default=0.15)
    parser.add_argument("--logging_steps", type=int, default=10)
    return parser.parse_args()


def make_corpus(n_tokens, vocab_size, seed):
    n_words = vocab_size - N_SPECIAL
    grammar = torch.Generator().manual_seed(0)
    successors = torch.stack([torch.randperm(n_words, generator=grammar)[:3] for _ in range(n_words)])
    g = torch.Generator().manual_seed(seed)
    probs = torch.tensor([0.7, 0.2, 0.1])
    restart = (torch.rand(n_tokens, generator=g) < 0.05).tolist()
    fresh = torch.randint(0, n_words, (n_tokens,), generator=g).tolist()
    choice = torch.multinomial(probs, n_tokens, replacement=True, generator=g).tolist()
    successors = successors.tolist()
    tokens = []
    w = fresh[0]
    for i in range(n_tokens):
        w = fresh[i] if restart[i] else successors[w][choice[i]]
        tokens.append(w + N_SPECIAL)
    return torch.tensor(tokens)


class GroupedTextDataset(Dataset):
    """group_texts: concatenate, then split into [CLS] + block + [SEP] chunks."""

    def __init__(self, tokens, max_seq_length):
        block = max_seq_length - 2
        n = len(tokens) // block
        self.blocks = tokens[: n * block].view(n, block)

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, idx):
        ids = torch.cat([torch.tensor([CLS]), self.blocks[idx], torch.tensor([SEP])])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


class DataCollatorForLanguageModeling:
    def __init__(self, vocab_size, mlm_probability=0.15):
        self.vocab_size = vocab_size
        self.mlm_probability = mlm_probability

    def __call__(self, examples):
        batch = {k: torch.stack([e[k] for e in examples]) for k in examples[0]}
        inputs = batch["input_ids"].clone()
        labels = inputs.clone()
        probability_matrix = torch.full(labels.shape, self.mlm_probability)
        special_tokens_mask = inputs < N_SPECIAL
        probability_matrix.masked_fill_(special_tokens_mask, value=0.0)
        masked_indices = torch.bernoulli(probability_matrix).bool()
        labels[~masked_indices] = -100

        indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
        inputs[indices_replaced] = MASK

        indices_random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~indices_replaced
        random_words = torch.randint(N_SPECIAL, self.vocab_size, labels.shape, dtype=torch.long)
        inputs[indices_random] = random_words[indices_random]

        batch["input_ids"] = inputs
        batch["labels"] = labels
        return batch


class BertSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)

    def forward(self, hidden_states, attention_mask):
        B, T, C = hidden_states.shape
        h = self.num_heads
        q = self.query(hidden_states).view(B, T, h, C // h).transpose(1, 2)
        k = self.key(hidden_states).view(B, T, h, C // h).transpose(1, 2)
        v = self.value(hidden_states).view(B, T, h, C // h).transpose(1, 2)
        mask = attention_mask[:, None, None, :].bool()
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ctx = ctx.transpose(1, 2).reshape(B, T, C)
        return self.LayerNorm(hidden_states + self.dense(ctx))


class BertLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, intermediate_size):
        super().__init__()
        self.attention = BertSelfAttention(hidden_size, num_heads)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.output = nn.Linear(intermediate_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)

    def forward(self, hidden_states, attention_mask):
        attn = self.attention(hidden_states, attention_mask)
        return self.LayerNorm(attn + self.output(F.gelu(self.intermediate(attn))))


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab_size, max_position_embeddings=64, hidden_size=64, num_layers=2, num_heads=4):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)
        self.layers = nn.ModuleList([BertLayer(hidden_size, num_heads, 4 * hidden_size) for _ in range(num_layers)])
        self.transform = nn.Linear(hidden_size, hidden_size)
        self.transform_LayerNorm = nn.LayerNorm(hidden_size)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def forward(self, input_ids, attention_mask=None, labels=None):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(pos)[None])
        for layer in self.layers:
            x = layer(x, attention_mask)
        x = self.transform_LayerNorm(F.gelu(self.transform(x)))
        logits = x @ self.word_embeddings.weight.t() + self.decoder_bias
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
        return {"loss": loss, "logits": logits}


def get_scheduler(name, optimizer, num_warmup_steps, num_training_steps):
    assert name == "linear"

    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    set_seed(args.seed)

    train_dataset = GroupedTextDataset(make_corpus(30 * 2416, args.vocab_size, seed=1), args.max_seq_length)
    eval_dataset = GroupedTextDataset(make_corpus(30 * 256, args.vocab_size, seed=2), args.max_seq_length)

    data_collator = DataCollatorForLanguageModeling(args.vocab_size, mlm_probability=args.mlm_probability)
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator,
                                  batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=args.per_device_eval_batch_size)

    model = BertForMaskedLM(args.vocab_size, max_position_embeddings=args.max_seq_length)

    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": args.weight_decay,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)

    overrode_max_train_steps = False
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
        overrode_max_train_steps = True

    lr_scheduler = get_scheduler(
        name=args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=args.num_warmup_steps * accelerator.num_processes,
        num_training_steps=args.max_train_steps
        if overrode_max_train_steps
        else args.max_train_steps * accelerator.num_processes,
    )

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if overrode_max_train_steps:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)

    total_batch_size = args.per_device_train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    accelerator.print("***** Running training *****")
    accelerator.print(f"  Num examples = {len(train_dataset)}")
    accelerator.print(f"  Num Epochs = {args.num_train_epochs}")
    accelerator.print(f"  Total train batch size (w. parallel, distributed & accumulation) = {total_batch_size}")
    accelerator.print(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
    accelerator.print(f"  Total optimization steps = {args.max_train_steps}")

    completed_steps = 0
    starting_epoch = 0
    running_loss = 0.0
    running_count = 0

    for epoch in range(starting_epoch, args.num_train_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs["loss"]
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            running_loss += loss.detach().float().item()
            running_count += 1
            if accelerator.sync_gradients:
                completed_steps += 1
                if completed_steps % args.logging_steps == 0:
                    accelerator.print(f"step {completed_steps}: loss {running_loss / running_count:.4f} "
                                      f"lr {lr_scheduler.get_last_lr()[0]:.2e}")
                    running_loss, running_count = 0.0, 0

            if completed_steps >= args.max_train_steps:
                break

        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)

            loss = outputs["loss"]
            losses.append(accelerator.gather_for_metrics(loss.repeat(args.per_device_eval_batch_size)))

        losses = torch.cat(losses)
        try:
            eval_loss = torch.mean(losses)
            perplexity = math.exp(eval_loss)
        except OverflowError:
            perplexity = float("inf")

        accelerator.print(f"epoch {epoch}: perplexity: {perplexity:.3f} eval_loss: {eval_loss:.4f}")


if __name__ == "__main__":
    main()
