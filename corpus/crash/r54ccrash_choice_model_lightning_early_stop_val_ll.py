"""Conditional logit discrete-choice model fitted with a PyTorch Lightning helper.

Each session offers 12 items with 4 observed item features and a per-session price; the utility
of an item is an item intercept + feature coefficients + a price coefficient, and the chosen item
is drawn from the softmax of the utilities. The model is fitted by maximum likelihood with a
train / validation split, in the style of a run(model, dataset_train, dataset_val, ...) helper.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_ITEMS, NUM_FEATS = 12, 4


def simulate_choices(n_sessions=4000):
    g = torch.Generator().manual_seed(0)
    item_feats = torch.randn(NUM_ITEMS, NUM_FEATS, generator=g)
    price = torch.rand(n_sessions, NUM_ITEMS, generator=g) * 2.0
    true_beta = torch.tensor([1.0, -0.5, 0.8, 0.3])
    true_alpha = torch.linspace(-1.0, 1.0, NUM_ITEMS)
    util = true_alpha + item_feats @ true_beta - 1.5 * price
    choice = torch.distributions.Categorical(logits=util).sample()
    return item_feats, price, choice


class ConditionalLogitModel(nn.Module):
    def __init__(self, item_feats):
        super().__init__()
        self.register_buffer("item_feats", item_feats)
        self.intercept = nn.Parameter(torch.zeros(NUM_ITEMS))
        self.beta = nn.Parameter(torch.zeros(NUM_FEATS))
        self.price_coef = nn.Parameter(torch.zeros(1))

    def forward(self, price):
        return self.intercept + self.item_feats @ self.beta + self.price_coef * price

    def negative_log_likelihood(self, price, choice):
        return F.cross_entropy(self(price), choice, reduction="sum")


class LightningModelWrapper(L.LightningModule):
    def __init__(self, model, learning_rate=0.01, model_optimizer="Adam"):
        super().__init__()
        self.model = model
        self.learning_rate = learning_rate
        self.model_optimizer = model_optimizer

    def training_step(self, batch, batch_idx):
        price, choice = batch
        loss = self.model.negative_log_likelihood(price, choice) / len(choice)
        self.log("train_loss", loss, prog_bar=False, on_step=True, on_epoch=True)
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step}: train nll/obs {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        price, choice = batch
        ll = -self.model.negative_log_likelihood(price, choice)
        self.log("val_log_likelihood", ll, reduce_fx="sum", on_epoch=True)

    def configure_optimizers(self):
        return getattr(torch.optim, self.model_optimizer)(self.parameters(), lr=self.learning_rate)


def run(model, dataset_train, dataset_val=None, batch_size=128, learning_rate=0.01,
        num_epochs=20, model_optimizer="Adam"):
    print("=" * 20, "received model", "=" * 20)
    print(model)
    train_loader = DataLoader(dataset_train, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(dataset_val, batch_size=len(dataset_val)) if dataset_val is not None else None
    callbacks = ([EarlyStopping(monitor="val_ll", mode="max", patience=10, min_delta=0.001)]
                 if val_loader is not None else [])
    wrapper = LightningModelWrapper(model, learning_rate, model_optimizer)
    trainer = L.Trainer(max_epochs=num_epochs, accelerator="cpu", callbacks=callbacks, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tempfile.mkdtemp())
    trainer.fit(wrapper, train_dataloaders=train_loader, val_dataloaders=val_loader)
    print("=" * 20, "model results", "=" * 20)
    print("intercept", model.intercept.detach().numpy().round(2))
    print("beta", model.beta.detach().numpy().round(2), "price", model.price_coef.item())
    return model


item_feats, price, choice = simulate_choices()
n_train = 3200
dataset_train = TensorDataset(price[:n_train], choice[:n_train])
dataset_val = TensorDataset(price[n_train:], choice[n_train:])
model = ConditionalLogitModel(item_feats)
run(model, dataset_train, dataset_val, batch_size=128, learning_rate=0.05, num_epochs=6)
