"""MLP classifier trained with Accelerate's gradient accumulation and a LR schedule.

As in the Accelerate gradient-accumulation guide: the Accelerator is built with
gradient_accumulation_steps, model/optimizer/dataloader/scheduler go through
accelerator.prepare, and the step sits inside `with accelerator.accumulate(model)`,
which only lets the optimizer and the prepared scheduler act every N batches.
The schedule (linear warm-up, linear decay) is sized in optimizer updates.
"""
import argparse

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset


def make_spirals(n, classes=3, noise=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    per = n // classes
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.1, 1.0, per)
        t = torch.linspace(c * 4.0, (c + 1) * 4.0, per) + noise * torch.randn(per, generator=g)
        xs.append(torch.stack([r * torch.sin(t), r * torch.cos(t)], dim=1))
        ys.append(torch.full((per,), c))
    return torch.cat(xs), torch.cat(ys)


def linear_warmup_decay(num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step + 1) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))
    return lr_lambda


def training_function(args):
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.gradient_accumulation_steps)
    torch.manual_seed(args.seed)

    x, y = make_spirals(2400, seed=args.seed)
    x_val, y_val = make_spirals(600, seed=args.seed + 1)
    train_dataloader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    eval_dataloader = DataLoader(TensorDataset(x_val, y_val), batch_size=200)

    model = nn.Sequential(
        nn.Linear(2, 64), nn.ReLU(),
        nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, 3),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    num_update_steps = (len(train_dataloader) * args.num_epochs) // args.gradient_accumulation_steps
    lr_scheduler = LambdaLR(optimizer, linear_warmup_decay(10, num_update_steps))

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.num_epochs):
        model.train()
        total_loss = 0.0
        for step, (inputs, targets) in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(inputs)
                loss = loss_fn(outputs, targets)
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            total_loss += loss.item()

        model.eval()
        correct = total = 0
        for inputs, targets in eval_dataloader:
            with torch.no_grad():
                preds = model(inputs).argmax(dim=-1)
            preds, targets = accelerator.gather_for_metrics((preds, targets))
            correct += (preds == targets).sum().item()
            total += targets.numel()
        accelerator.print(f"epoch {epoch}: train loss {total_loss / len(train_dataloader):.4f} "
                          f"lr {lr_scheduler.get_last_lr()[0]:.2e} eval accuracy {correct / total:.3f}")


def main():
    parser = argparse.ArgumentParser(description="gradient accumulation with Accelerate")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--num_epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    training_function(args)


if __name__ == "__main__":
    main()
