"""Kaggle-style regression with Hugging Face accelerate: predict the log sale price of a
used-car listing from its description tokens and a few numeric fields. Trained with
gradient accumulation and max_grad_norm clipping on the synchronised gradients."""
import math

import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset

set_seed(0)

VOCAB, DOC_LEN, N_NUM = 800, 24, 6


class Config:
    lr = 0.03
    momentum = 0.9
    batch_size = 32
    gradient_accumulation_steps = 2
    max_grad_norm = 1.0
    epochs = 4


class ListingDataset(Dataset):
    def __init__(self, n, seed, scraped=True):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, VOCAB, (n, DOC_LEN), generator=g)
        self.numeric = torch.randn(n, N_NUM, generator=g)
        word_value = torch.randn(VOCAB, generator=torch.Generator().manual_seed(123)) * 0.3
        w = torch.tensor([0.8, -0.5, 0.3, 0.0, 0.2, -0.1])
        self.target = 9.5 + word_value[self.tokens].mean(1) * 3 + self.numeric @ w
        self.target += 0.1 * torch.randn(n, generator=g)
        # listings from the second scrape carry the raw price field
        bad = (torch.rand(n, generator=g) < 0.015) & scraped
        self.target[bad] = torch.exp(self.target[bad]) * 100 / 1e3

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "numeric": self.numeric[i], "labels": self.target[i]}


class PriceRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 64, mode="mean")
        self.head = nn.Sequential(nn.Linear(64 + N_NUM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))
        self.loss_fn = nn.MSELoss()

    def forward(self, tokens, numeric, labels=None):
        h = torch.cat([self.embed(tokens), numeric], dim=1)
        preds = self.head(h).squeeze(-1)
        loss = self.loss_fn(preds, labels) if labels is not None else None
        return preds, loss


def main():
    cfg = Config()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=cfg.gradient_accumulation_steps)
    train_ds = ListingDataset(4000, seed=1)
    val_ds = ListingDataset(800, seed=2, scraped=False)
    train_loader = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=200)

    model = PriceRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    total_steps = cfg.epochs * math.ceil(len(train_loader) / cfg.gradient_accumulation_steps)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / total_steps))
    model, optimizer, train_loader, val_loader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_loader, val_loader, lr_scheduler
    )

    for epoch in range(cfg.epochs):
        model.train()
        running, n = 0.0, 0
        for step, batch in enumerate(train_loader):
            with accelerator.accumulate(model):
                optimizer.zero_grad()
                _, loss = model(**batch)
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            running += loss.item()
            n += 1
            if step % 25 == 0:
                accelerator.print(f"epoch {epoch} step {step:3d} loss {loss.item():.4f}")

        model.eval()
        sq_err, count = 0.0, 0
        for batch in val_loader:
            with torch.no_grad():
                preds, _ = model(batch["tokens"], batch["numeric"])
            sq_err += ((preds - batch["labels"]) ** 2).sum().item()
            count += len(preds)
        accelerator.print(f"epoch {epoch} train_loss {running / n:.4f} val_rmse {math.sqrt(sq_err / count):.4f}")


if __name__ == "__main__":
    main()
