"""Relation classification with a small Transformer encoder (Lightning).

Each example is a token sequence holding a subject/object pair; the model predicts which of
four relations links them. Synthetic data: the relation is encoded by a marker token.
"""
import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

VOCAB = 100
SEQ_LEN = 32
N_REL = 4


class RelationDataset(Dataset):
    def __init__(self, n=4096, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(N_REL, VOCAB, (n, SEQ_LEN), generator=g)
        self.y = torch.randint(0, N_REL, (n,), generator=g)
        pos = torch.randint(0, SEQ_LEN, (n,), generator=g)
        self.x[torch.arange(n), pos] = self.y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class RelTransformer(pl.LightningModule):
    def __init__(self, d_model=64, nhead=4, layers=2, lr=1.0):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(1, SEQ_LEN, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead, 2 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.rel_head = nn.Linear(d_model, N_REL)

    def forward(self, x):
        h = self.encoder(self.embed(x) + self.pos)
        return self.rel_head(h.mean(dim=1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss_rel = F.cross_entropy(logits, y)
        acc = (logits.argmax(-1) == y).float().mean()
        self.log("loss_rel", loss_rel, prog_bar=True)
        self.log("acc", acc, prog_bar=True)
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} iter {batch_idx:3d}  loss_rel {loss_rel.item():.4f}  acc {acc.item():.3f}")
        return loss_rel

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


if __name__ == "__main__":
    pl.seed_everything(0)
    loader = DataLoader(RelationDataset(), batch_size=32, shuffle=True)
    model = RelTransformer()
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, limit_train_batches=80)
    trainer.fit(model, loader)
