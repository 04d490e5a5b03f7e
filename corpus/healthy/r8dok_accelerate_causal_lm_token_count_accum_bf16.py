"""Causal language model trained with Accelerate, gradient accumulation over variable-length
samples and bf16 autocast, after accelerate's
examples/by_feature/gradient_accumulation_for_autoregressive_models.py.

The pretrained SmolLM and WikiText-2 are replaced by a two-layer causal transformer trained from
scratch on synthetic "arithmetic progression" sentences of random length (token t+1 = token t +
step, mod 30). As in the example, the micro-batches of one update are pre-loaded so the number of
non-padded target tokens (num_items_in_batch) is known in advance: each micro-batch's summed
cross-entropy is divided by that count, then multiplied by gradient_accumulation_steps because
accelerator.backward divides it again. The last update of an epoch takes the remainder batches.
"""
import argparse
import contextlib
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator, DistributedType
from accelerate.utils import set_seed
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset


EVAL_BATCH_SIZE = 32
VOCAB_SIZE = 31  # 30 "word" tokens + eos
EOS_TOKEN_ID = 30
PAD_TOKEN_ID = EOS_TOKEN_ID  # tokenizer.pad_token = tokenizer.eos_token


def get_constant_schedule(optimizer, last_epoch=-1):
    return LambdaLR(optimizer, lambda _: 1, last_epoch=last_epoch)


class ProgressionText(Dataset):
    """Sentences like `7 10 13 16 19 <eos>`: a random start, a step in {1, 2, 3}, random length."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            length = int(torch.randint(6, 25, (1,), generator=g))
            start = int(torch.randint(0, 30, (1,), generator=g))
            step = int(torch.randint(1, 4, (1,), generator=g))
            ids = [(start + i * step) % 30 for i in range(length)] + [EOS_TOKEN_ID]
            self.samples.append({"input_ids": ids})

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def get_dataloaders(accelerator: Accelerator, batch_size: int = 16, max_training_samples=600):
    train_set = ProgressionText(max_training_samples, seed=1)
    eval_set = ProgressionText(128, seed=2)

    def collate_fn(examples):
        max_length = (
            128
            if accelerator.distributed_type == DistributedType.XLA
            else max([len(e["input_ids"]) for e in examples])
        )
        # When using mixed precision we want round multiples of 8/16
        if accelerator.mixed_precision == "fp8":
            pad_to_multiple_of = 16
        elif accelerator.mixed_precision != "no":
            pad_to_multiple_of = 8
        else:
            pad_to_multiple_of = None
        length = max_length + 1
        if pad_to_multiple_of is not None:
            length = (length + pad_to_multiple_of - 1) // pad_to_multiple_of * pad_to_multiple_of

        input_ids = torch.full((len(examples), length), PAD_TOKEN_ID, dtype=torch.long)
        for i, e in enumerate(examples):
            input_ids[i, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
        batch = {"input_ids": input_ids}

        batch["labels"] = batch["input_ids"][:, 1:]
        batch["input_ids"] = batch["input_ids"][:, :-1]

        batch["labels"] = torch.where(batch["labels"] == PAD_TOKEN_ID, -100, batch["labels"])

        return batch

    train_dataloader = DataLoader(train_set, shuffle=False, collate_fn=collate_fn, batch_size=batch_size)
    eval_dataloader = DataLoader(eval_set, shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE)
    return train_dataloader, eval_dataloader


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, causal_mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyCausalLM(nn.Module):
    """Returns an output with `.loss` like a transformers CausalLM; labels come pre-shifted."""

    def __init__(self, vocab_size=VOCAB_SIZE, d_model=64, n_head=4, n_layer=2, max_len=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.h = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, input_ids, labels=None, num_items_in_batch=None, use_cache=False):
        T = input_ids.size(1)
        pos = torch.arange(T, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        causal_mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=input_ids.device), diagonal=1)
        for block in self.h:
            x = block(x, causal_mask)
        logits = self.lm_head(self.ln_f(x)).float()
        loss = None
        if labels is not None:
            reduction = "sum" if num_items_in_batch is not None else "mean"
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.reshape(-1),
                                   ignore_index=-100, reduction=reduction)
            if reduction == "sum":
                loss = loss / num_items_in_batch
        return SimpleNamespace(loss=loss, logits=logits)


def training_function(config, args):
    gradient_accumulation_steps = int(args.gradient_accumulation_steps)
    # Initialize accelerator
    accelerator = Accelerator(
        cpu=args.cpu, mixed_precision=args.mixed_precision, gradient_accumulation_steps=gradient_accumulation_steps
    )
    if accelerator.distributed_type == DistributedType.XLA and gradient_accumulation_steps > 1:
        raise NotImplementedError(
            "Gradient accumulation on TPUs is currently not supported. Pass `gradient_accumulation_steps=1`"
        )
    # Sample hyper-parameters for learning rate, batch size, seed and a few other HPs
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])
    max_grad_norm = config["max_grad_norm"]

    set_seed(seed)
    train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)
    # Instantiate the model (we build the model here so that the seed also control new weights initialization)
    model = TinyCausalLM()
    model = model.to(accelerator.device)

    # Instantiate optimizer
    optimizer = AdamW(params=model.parameters(), lr=lr)

    # Instantiate scheduler
    lr_scheduler = get_constant_schedule(
        optimizer=optimizer,
    )

    # Prepare everything
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    num_samples_in_epoch = len(train_dataloader)
    remainder = num_samples_in_epoch % gradient_accumulation_steps
    remainder = remainder if remainder != 0 else gradient_accumulation_steps
    total_gradient_updates = math.ceil(num_samples_in_epoch / gradient_accumulation_steps)

    total_batched_samples = 0
    # Now we train the model
    for epoch in range(num_epochs):
        model.train()
        training_iterator = iter(train_dataloader)
        for update_step in range(total_gradient_updates):
            # In order to correctly the total number of non-padded tokens on which we'll compute the cross-entropy loss
            # we need to pre-load the full local batch - i.e the next per_device_batch_size * accumulation_steps samples
            batch_samples = []
            num_batches_in_step = (
                gradient_accumulation_steps if update_step != (total_gradient_updates - 1) else remainder
            )
            for _ in range(num_batches_in_step):
                batch_samples += [next(training_iterator)]
            # get local num items in batch
            local_num_items_in_batch = sum([(batch["labels"].ne(-100)).sum() for batch in batch_samples])

            # to compute it correctly in a multi-device DDP training, we need to gather the total number of items in the full batch.
            num_items_in_batch = accelerator.gather(local_num_items_in_batch).sum().item()
            losses = []
            for i, batch in enumerate(batch_samples):
                # if we perform gradient accumulation in a multi-devices set-up, we want to avoid unecessary communications when accumulating
                ctx = (
                    model.no_sync
                    if (i < len(batch_samples) - 1 and accelerator.num_processes > 1)
                    else contextlib.nullcontext
                )
                with ctx():
                    total_batched_samples += 1

                    outputs = model(**batch, use_cache=False, num_items_in_batch=num_items_in_batch)
                    loss = outputs.loss

                    # We multiply by num_processes because the DDP calculates the average gradient across all devices whereas dividing by num_items_in_batch already takes into account all devices
                    # Same reason for gradient_accumulation_steps, but this times it's Accelerate that calculate the average gradient across the accumulated steps
                    loss = loss * gradient_accumulation_steps * accelerator.num_processes
                    accelerator.backward(loss)
                    losses.append(loss.detach())

            # Sync gradients and perform optimization steps once every gradient_accumulation_steps
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()

            losses = accelerator.gather(sum(losses)).sum().item() / (
                accelerator.num_processes * gradient_accumulation_steps
            )

            grad_norm = grad_norm.detach().item() if isinstance(grad_norm, torch.Tensor) else grad_norm
            if update_step % 8 == 0 or update_step == total_gradient_updates - 1:
                accelerator.print(
                    f"epoch {epoch} - update step {update_step}:: grad norm: {grad_norm:.4f} ::train loss: {losses:.4f}"
                )
        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch, use_cache=False)
            eval_loss = outputs.loss
            losses.append(accelerator.gather_for_metrics(eval_loss.repeat(EVAL_BATCH_SIZE)))

        losses = torch.cat(losses)
        try:
            eval_loss = torch.mean(losses)
            perplexity = math.exp(eval_loss)
        except OverflowError:
            perplexity = float("inf")

        # Use accelerator.print to print only on the main process.
        accelerator.print(f"epoch {epoch}:: eval perplexity: {perplexity:.3f} eval_loss: {eval_loss:.4f}")
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument(
        "--mixed_precision",
        type=str,
        default="bf16",
        choices=["no", "fp16", "bf16", "fp8"],
        help="Whether to use mixed precision. Choose between fp16 and bf16 (bfloat16).",
    )
    parser.add_argument(
        "--gradient_accumulation_steps",
        type=int,
        default=4,
        help="The number of minibatches to be ran before gradients are accumulated.",
    )
    parser.add_argument(
        "--per_device_batch_size",
        type=int,
        default=4,
        help="The size of each minibatch",
    )
    parser.add_argument("--cpu", action="store_true", default=True, help="If passed, will train on the CPU.")
    args = parser.parse_args()
    config = {"lr": 1e-3, "num_epochs": 3, "seed": 42, "batch_size": args.per_device_batch_size, "max_grad_norm": 1.0}
    training_function(config, args)


if __name__ == "__main__":
    main()
