"""Loan-default classification on a tabular applications export, with a category-embedding
MLP in PyTorch Lightning (the pytorch_tabular CategoryEmbeddingModel recipe): categorical
columns are ordinal-encoded (missing or unseen -> 0) and embedded, continuous columns are
standardised and pass through a BatchNorm layer, and the concatenation goes through an MLP.
"""
import logging
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

CONTINUOUS_COLS = ["age", "annual_income", "loan_amount", "credit_history_months", "open_accounts", "debt_to_income"]
CATEGORICAL_COLS = ["employment_type", "home_ownership", "purpose", "region"]
TARGET = "default"


def load_applications(n=6000, seed=11):
    """Stand-in for the applications CSV export (empty cells are read as NaN or '')."""
    rng = np.random.default_rng(seed)
    df = {}
    df["age"] = rng.uniform(21, 70, n).round()
    df["annual_income"] = np.exp(rng.normal(10.8, 0.5, n)).round(-2)
    df["loan_amount"] = (df["annual_income"] * rng.uniform(0.05, 0.6, n)).round(-2)
    df["credit_history_months"] = np.clip(12 * (df["age"] - 18) * rng.uniform(0.2, 1.0, n), 0, None).round()
    df["open_accounts"] = rng.poisson(4, n).astype(float)
    df["debt_to_income"] = rng.uniform(0.0, 0.5, n).round(3)
    df["employment_type"] = rng.choice(["salaried", "self_employed", "contract", "unemployed", ""], n, p=[0.55, 0.2, 0.15, 0.05, 0.05])
    df["home_ownership"] = rng.choice(["rent", "mortgage", "own"], n, p=[0.45, 0.4, 0.15])
    df["purpose"] = rng.choice(["car", "home", "education", "debt", "business", "other"], n)
    df["region"] = rng.choice(["north", "south", "east", "west", ""], n, p=[0.27, 0.27, 0.2, 0.2, 0.06])
    logit = (-1.2 + 2.2 * df["loan_amount"] / df["annual_income"] + 3.0 * df["debt_to_income"]
             - 0.004 * df["credit_history_months"] + 0.08 * df["open_accounts"]
             + 1.1 * (df["employment_type"] == "unemployed") - 0.5 * (df["home_ownership"] == "own"))
    df[TARGET] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    df["credit_history_months"][rng.random(n) < 0.07] = np.nan
    df["annual_income"][rng.random(n) < 0.03] = np.nan
    return df


class TabularPreprocessor:
    def fit(self, df):
        self.categories = {c: {v: i + 1 for i, v in enumerate(sorted(set(df[c]) - {""}))} for c in CATEGORICAL_COLS}
        X = np.stack([df[c] for c in CONTINUOUS_COLS], axis=1)
        self.mean = np.nanmean(X, axis=0)
        self.std = np.nanstd(X, axis=0)
        return self

    def transform(self, df):
        X_cont = np.stack([df[c] for c in CONTINUOUS_COLS], axis=1)
        X_cont = (X_cont - self.mean) / self.std
        X_cat = np.stack([[self.categories[c].get(v, 0) for v in df[c]] for c in CATEGORICAL_COLS], axis=1)
        return X_cont.astype(np.float32), X_cat.astype(np.int64), df[TARGET]


class TabularDataset(Dataset):
    def __init__(self, X_cont, X_cat, y):
        self.X_cont, self.X_cat, self.y = torch.from_numpy(X_cont), torch.from_numpy(X_cat), torch.from_numpy(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"continuous": self.X_cont[i], "categorical": self.X_cat[i], "target": self.y[i]}


class CategoryEmbeddingModel(L.LightningModule):
    def __init__(self, cardinalities, n_continuous, layers=(128, 64), lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.embeddings = nn.ModuleList([nn.Embedding(card + 1, min(50, (card + 2) // 2)) for card in cardinalities])
        self.normalizing_batch_norm = nn.BatchNorm1d(n_continuous)
        in_dim = sum(e.embedding_dim for e in self.embeddings) + n_continuous
        blocks = []
        for width in layers:
            blocks += [nn.Linear(in_dim, width), nn.ReLU(), nn.Dropout(0.1)]
            in_dim = width
        self.backbone = nn.Sequential(*blocks)
        self.head = nn.Linear(in_dim, 2)

    def forward(self, batch):
        emb = torch.cat([e(batch["categorical"][:, i]) for i, e in enumerate(self.embeddings)], dim=1)
        cont = self.normalizing_batch_norm(batch["continuous"])
        return self.head(self.backbone(torch.cat([emb, cont], dim=1)))

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self(batch), batch["target"])
        if self.global_step % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} train_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self(batch)
        self.log("valid_loss", F.cross_entropy(logits, batch["target"]))
        self.log("valid_accuracy", (logits.argmax(1) == batch["target"]).float().mean())

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            m = self.trainer.callback_metrics
            print(f"== epoch {self.current_epoch} valid_loss {m['valid_loss'].item():.4f} "
                  f"valid_accuracy {m['valid_accuracy'].item():.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(42, verbose=False)
    df = load_applications()
    n = len(df[TARGET])
    idx = np.random.default_rng(0).permutation(n)
    train_idx, val_idx = idx[: int(0.8 * n)], idx[int(0.8 * n):]
    train_df = {k: v[train_idx] for k, v in df.items()}
    val_df = {k: v[val_idx] for k, v in df.items()}

    prep = TabularPreprocessor().fit(train_df)
    train_ds = TabularDataset(*prep.transform(train_df))
    val_ds = TabularDataset(*prep.transform(val_df))
    print(f"train {len(train_ds)} rows, valid {len(val_ds)} rows, default rate {train_df[TARGET].mean():.3f}")

    model = CategoryEmbeddingModel([len(prep.categories[c]) for c in CATEGORICAL_COLS], len(CONTINUOUS_COLS))
    trainer = L.Trainer(max_epochs=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, DataLoader(train_ds, batch_size=128, shuffle=True), DataLoader(val_ds, batch_size=512))


if __name__ == "__main__":
    main()
