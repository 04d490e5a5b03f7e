"""Checkpoint / resume with Accelerate, after accelerate's examples/by_feature/checkpointing.py.

An MLP classifier on synthetic tabular data is trained with save_state every 20 optimizer steps.
The first run is cut off after 70 steps (as a preempted job would be); the second run builds
everything again from scratch, finds the newest step_* folder, load_state()s model, optimizer,
scheduler and RNG states from it, skips the batches of the current epoch that were already seen
with skip_first_batches, and trains to the end.
"""
import argparse
import os
import tempfile

import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim import AdamW
from torch.utils.data import DataLoader, Dataset


class TabularDataset(Dataset):
    def __init__(self, n, seed, dim=24, n_classes=5):
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(dim, n_classes, generator=torch.Generator().manual_seed(99))
        self.x = torch.randn(n, dim, generator=g)
        logits = self.x @ w + 0.3 * torch.randn(n, n_classes, generator=g)
        self.y = logits.argmax(dim=1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"features": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self, dim=24, hidden=128, n_classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, n_classes))

    def forward(self, features, labels=None):
        logits = self.net(features)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels)
        return loss, logits


def get_dataloaders(accelerator, batch_size):
    train_dataloader = DataLoader(TabularDataset(2400, seed=1), shuffle=True, batch_size=batch_size)
    eval_dataloader = DataLoader(TabularDataset(600, seed=2), shuffle=False, batch_size=200)
    return train_dataloader, eval_dataloader


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) /
                   float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def training_function(config, args):
    accelerator = Accelerator(cpu=True)
    lr, num_epochs, seed, batch_size = config["lr"], config["num_epochs"], config["seed"], config["batch_size"]
    checkpointing_steps = int(args.checkpointing_steps)

    set_seed(seed)
    train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)
    model = Classifier()
    optimizer = AdamW(params=model.parameters(), lr=lr, weight_decay=0.01)
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=10, num_training_steps=len(train_dataloader) * num_epochs)
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)

    overall_step = 0
    starting_epoch = 0
    resume_step = None
    if args.resume_from_checkpoint:
        if args.resume_from_checkpoint is not None and args.resume_from_checkpoint != "latest":
            accelerator.print(f"Resumed from checkpoint: {args.resume_from_checkpoint}")
            accelerator.load_state(args.resume_from_checkpoint)
            path = os.path.basename(args.resume_from_checkpoint)
        else:
            dirs = [f.path for f in os.scandir(args.output_dir) if f.is_dir()]
            dirs.sort(key=lambda d: int(os.path.basename(d).split("_")[-1]))
            path = os.path.basename(dirs[-1])
            accelerator.print(f"Resumed from checkpoint: {dirs[-1]}")
            accelerator.load_state(dirs[-1])
        training_difference = os.path.splitext(path)[0]
        if "epoch" in training_difference:
            starting_epoch = int(training_difference.replace("epoch_", "")) + 1
            resume_step = None
        else:
            resume_step = int(training_difference.replace("step_", ""))
            starting_epoch = resume_step // len(train_dataloader)
            resume_step -= starting_epoch * len(train_dataloader)
        overall_step = starting_epoch * len(train_dataloader)

    for epoch in range(starting_epoch, num_epochs):
        model.train()
        if args.resume_from_checkpoint and epoch == starting_epoch and resume_step is not None:
            active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
            overall_step += resume_step
        else:
            active_dataloader = train_dataloader
        total_loss, n_batches = 0.0, 0
        for batch in active_dataloader:
            loss, _ = model(**batch)
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            overall_step += 1
            total_loss += loss.item()
            n_batches += 1
            if overall_step % 10 == 0:
                accelerator.print(f"  step {overall_step}: loss {loss.item():.4f} lr {lr_scheduler.get_last_lr()[0]:.2e}")

            if overall_step % checkpointing_steps == 0:
                output_dir = os.path.join(args.output_dir, f"step_{overall_step}")
                accelerator.save_state(output_dir)

            if args.stop_after_steps is not None and overall_step >= args.stop_after_steps:
                accelerator.print(f"job interrupted at step {overall_step}")
                return

        model.eval()
        correct, seen = 0, 0
        for batch in eval_dataloader:
            with torch.no_grad():
                _, logits = model(**batch)
            predictions, references = accelerator.gather_for_metrics((logits.argmax(dim=-1), batch["labels"]))
            correct += (predictions == references).sum().item()
            seen += references.numel()
        accelerator.print(f"epoch {epoch}: train loss {total_loss / max(1, n_batches):.4f} "
                          f"eval accuracy {correct / seen:.3f}")
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser(description="Simple example of a checkpointed training script.")
    parser.add_argument("--checkpointing_steps", type=str, default="20")
    parser.add_argument("--output_dir", type=str, default=None)
    parser.add_argument("--resume_from_checkpoint", type=str, default=None)
    parser.add_argument("--stop_after_steps", type=int, default=None)
    args = parser.parse_args()
    config = {"lr": 3e-3, "num_epochs": 5, "seed": 42, "batch_size": 64}

    with tempfile.TemporaryDirectory() as tmp:
        args.output_dir = tmp
        print("=== first run (preempted) ===")
        args.stop_after_steps = 70
        training_function(config, args)
        print("=== restarted run ===")
        args.stop_after_steps = None
        args.resume_from_checkpoint = "latest"
        training_function(config, args)


if __name__ == "__main__":
    main()
