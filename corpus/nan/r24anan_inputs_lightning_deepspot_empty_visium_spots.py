"""DeepSpot-style spatial transcriptomics: predict spot gene expression from
histology tile embeddings (spot, sub-spots, neighbouring spots) with a
LightningModule (phi / rho ensembles, DeepSets pooling)."""
import tempfile

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

L.seed_everything(2024, verbose=False)
rng = np.random.default_rng(2024)

N_SPOTS, N_SUB, N_NEIGH, EMB, N_GENES = 1200, 4, 6, 64, 50

# ---- simulated Visium section: tile embeddings + raw UMI counts per spot ----
programs = rng.normal(size=(8, EMB)).astype(np.float32)
loadings = rng.gamma(2.0, 1.0, size=(8, N_GENES)).astype(np.float32)
mix = rng.dirichlet(np.ones(8) * 0.5, size=N_SPOTS).astype(np.float32)
spot_emb = mix @ programs + 0.3 * rng.normal(size=(N_SPOTS, EMB)).astype(np.float32)
sub_emb = spot_emb[:, None, :] + 0.5 * rng.normal(size=(N_SPOTS, N_SUB, EMB)).astype(np.float32)
neigh_idx = rng.integers(0, N_SPOTS, size=(N_SPOTS, N_NEIGH))
neigh_emb = spot_emb[neigh_idx] + 0.3 * rng.normal(size=(N_SPOTS, N_NEIGH, EMB)).astype(np.float32)
depth = rng.lognormal(7.0, 0.5, size=(N_SPOTS, 1))
rate = (mix @ loadings) / (mix @ loadings).sum(1, keepdims=True)
counts = rng.poisson(rate * depth).astype(np.float32)
edge = rng.random(N_SPOTS) < 0.03
counts[edge] = 0.0

# ---- preprocessing (normalize_total + log1p) ----
libsize = counts.sum(axis=1, keepdims=True)
expr = np.log1p(counts / libsize * 1e4).astype(np.float32)
mean, std = expr.mean(axis=0), expr.std(axis=0) + 1e-6
print(f"spots {N_SPOTS}, genes {N_GENES}, median UMIs/spot {np.median(libsize):.0f}")


class SpotDataset(Dataset):
    def __init__(self, idx):
        self.idx = idx

    def __len__(self):
        return len(self.idx)

    def __getitem__(self, i):
        j = self.idx[i]
        X = [torch.from_numpy(spot_emb[j][None]), torch.from_numpy(sub_emb[j]),
             torch.from_numpy(neigh_emb[j])]
        y = torch.from_numpy((expr[j] - mean) / std)
        return X, y


class Phi(nn.Module):
    def __init__(self, i, o, p):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(i, o), nn.Dropout(p), nn.ReLU())

    def forward(self, x):
        return self.model(x)


class Rho(nn.Module):
    def __init__(self, i, o, p):
        super().__init__()
        self.model = nn.Sequential(nn.Dropout(p), nn.ReLU(), nn.Linear(i, o))

    def forward(self, x):
        return self.model(x)


class DeepSpot(L.LightningModule):
    def __init__(self, input_size, output_size, lr=1e-3, p=0.1, n_ensemble=3, hidden=128):
        super().__init__()
        self.save_hyperparameters()
        self.phi_spot = nn.ModuleList([Phi(input_size, hidden, p) for _ in range(n_ensemble)])
        self.rho = nn.ModuleList([Rho(3 * hidden, output_size, p) for _ in range(n_ensemble)])
        self.epoch_losses = []

    def _apply_phi(self, x, op):
        b, s = x.shape[:2]
        x_phi = torch.stack([phi(x.reshape(-1, self.hparams.input_size)) for phi in self.phi_spot], dim=1)
        x_phi = torch.median(x_phi, dim=1).values.view(b, s, -1)
        if op == "sum":
            return x_phi.sum(1)
        if op == "max":
            return x_phi.max(1).values
        return x_phi.view(b, -1)

    def forward(self, X):
        x_spot, x_sub, x_neigh = X
        h = torch.cat([self._apply_phi(x_spot, "none"), self._apply_phi(x_sub, "sum"),
                       self._apply_phi(x_neigh, "max")], dim=1)
        return torch.stack([rho(h) for rho in self.rho], dim=1).mean(1)

    def training_step(self, batch, batch_idx):
        X, y = batch
        loss = nn.functional.mse_loss(self(X), y)
        self.epoch_losses.append(loss.item())
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {batch_idx:3d} train mse {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        X, y = batch
        y_hat = self(X)
        self.log("val_mse", nn.functional.mse_loss(y_hat, y))
        yc, pc = y - y.mean(0), y_hat - y_hat.mean(0)
        r = (yc * pc).sum(0) / (yc.norm(dim=0) * pc.norm(dim=0) + 1e-8)
        self.log("val_pearson", r.mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if self.epoch_losses:
            print(f"epoch {self.current_epoch} train mse {np.mean(self.epoch_losses):.4f} "
                  f"val mse {m['val_mse'].item():.4f} val pearson {m['val_pearson'].item():.4f}")
            self.epoch_losses = []

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-6)


perm = rng.permutation(N_SPOTS)
train_ds, val_ds = SpotDataset(perm[:1000]), SpotDataset(perm[1000:])
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=100)

model = DeepSpot(EMB, N_GENES)
with tempfile.TemporaryDirectory() as tmp:
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0,
                        default_root_dir=tmp)
    trainer.fit(model, train_loader, val_loader)
