"""MOLIR (regression MOLI) drug response model for one drug: three omics encoders
(gene expression, mutations, copy number) -> concatenated, L2-normalised embedding ->
regressor, trained on LN_IC50 with triplet margin loss + MSE in a LightningModule."""
import tempfile

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

pl.seed_everything(7, verbose=False)
rng = np.random.default_rng(7)

N_CELL_LINES, N_GENES, N_MUT, N_CNV = 480, 400, 200, 200


class FeatureDataset:
    def __init__(self, features):
        self.features = features

    def apply(self, function, view):
        for cl in self.features:
            self.features[cl][view] = function(self.features[cl][view])

    def fit_transform_standardize(self, train_ids, view):
        train = np.stack([self.features[cl][view] for cl in train_ids])
        mean, std = train.mean(axis=0), train.std(axis=0)
        for cl in self.features:
            self.features[cl][view] = ((self.features[cl][view] - mean) / std).astype(np.float32)


def load_ccle_like():
    """TPM expression, binary mutations, GISTIC copy number and LN_IC50 for one drug."""
    base = rng.normal(2.0, 1.2, size=N_GENES)
    tpm = np.exp(base + 0.8 * rng.normal(size=(N_CELL_LINES, N_GENES)))
    low = rng.choice(N_GENES, 60, replace=False)
    dropout = rng.random((N_CELL_LINES, 60)) < rng.uniform(0.05, 0.4, size=60)
    tpm[:, low] = np.where(dropout, 0.0, tpm[:, low] * 0.05)
    mut = (rng.random((N_CELL_LINES, N_MUT)) < 0.06).astype(np.float32)
    cnv = rng.choice([-2, -1, 0, 1, 2], size=(N_CELL_LINES, N_CNV), p=[0.05, 0.15, 0.6, 0.15, 0.05])
    markers = rng.choice(N_GENES, 12, replace=False)
    w = rng.normal(0, 0.6, size=12)
    ln_ic50 = (np.log1p(tpm[:, markers]) - np.log1p(tpm[:, markers]).mean(0)) @ w
    ln_ic50 += 1.5 * mut[:, 3] - 1.0 * mut[:, 17] + 0.4 * cnv[:, 5] + rng.normal(0, 0.5, N_CELL_LINES) + 2.0
    ids = [f"ACH-{i:06d}" for i in range(N_CELL_LINES)]
    features = {cl: {"gene_expression": tpm[i], "mutations": mut[i],
                     "copy_number_variation_gistic": cnv[i].astype(np.float32)} for i, cl in enumerate(ids)}
    return FeatureDataset(features), ids, ln_ic50.astype(np.float32)


def load_cell_line_features():
    feature_dataset, ids, response = load_ccle_like()
    # log transformation
    feature_dataset.apply(function=np.log, view="gene_expression")
    return feature_dataset, ids, response


class RegressionDataset(Dataset):
    def __init__(self, ids, response, cell_line_input):
        self.ids, self.response, self.cell_line_input = ids, response, cell_line_input

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, idx):
        f = self.cell_line_input.features[self.ids[idx]]
        return (f["gene_expression"].astype(np.float32), f["mutations"],
                f["copy_number_variation_gistic"], np.float32(self.response[idx]))


def generate_triplets_indices(y, positive_range, negative_range):
    pos, neg = [], []
    for i, label in enumerate(y):
        similar = np.where((label - positive_range <= y) & (y <= label + positive_range))[0]
        similar = similar[similar != i]
        if len(similar) == 0:
            similar = np.array([np.argsort(np.abs(y - label))[1]])
        dissimilar = np.where((label - negative_range >= y) | (y >= label + negative_range))[0]
        if len(dissimilar) == 0:
            dissimilar = np.argsort(np.abs(y - label))[-1:]
        pos.append(np.random.choice(similar))
        neg.append(np.random.choice(dissimilar))
    return np.array(pos), np.array(neg)


class MOLIEncoder(nn.Module):
    def __init__(self, input_size, output_size, dropout_rate):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(input_size, output_size), nn.ReLU(),
                                    nn.BatchNorm1d(output_size), nn.Dropout(dropout_rate))

    def forward(self, x):
        return self.encode(x)


class MOLIRegressor(nn.Module):
    def __init__(self, input_size, dropout_rate):
        super().__init__()
        self.regressor = nn.Sequential(nn.Linear(input_size, 1), nn.Dropout(dropout_rate))

    def forward(self, x):
        return self.regressor(x)


class MOLIModel(pl.LightningModule):
    def __init__(self, hpams, input_dim_expr, input_dim_mut, input_dim_cnv):
        super().__init__()
        self.save_hyperparameters()
        self.lr = hpams["learning_rate"]
        self.triplet_loss = nn.TripletMarginLoss(margin=hpams["margin"], p=2)
        self.regression_loss = nn.MSELoss()
        self.positive_range, self.negative_range = 1.0, 1.0
        self.expression_encoder = MOLIEncoder(input_dim_expr, hpams["h_dim1"], hpams["dropout_rate"])
        self.mutation_encoder = MOLIEncoder(input_dim_mut, hpams["h_dim2"], hpams["dropout_rate"])
        self.cna_encoder = MOLIEncoder(input_dim_cnv, hpams["h_dim3"], hpams["dropout_rate"])
        self.regressor = MOLIRegressor(hpams["h_dim1"] + hpams["h_dim2"] + hpams["h_dim3"], hpams["dropout_rate"])
        self.step_losses = []

    def _encode_and_concatenate(self, gene_expression, mutations, copy_number):
        z = torch.cat((self.expression_encoder(gene_expression), self.mutation_encoder(mutations),
                       self.cna_encoder(copy_number)), dim=1)
        return nn.functional.normalize(z, p=2, dim=0)

    def _compute_loss(self, z, preds, y):
        pos, neg = generate_triplets_indices(y.cpu().numpy(), self.positive_range, self.negative_range)
        triplet_loss = self.triplet_loss(z, z[pos], z[neg])
        regression_loss = self.regression_loss(preds.squeeze(), y)
        return triplet_loss + regression_loss, regression_loss

    def training_step(self, batch, batch_idx):
        gene_expression, mutations, copy_number, response = batch
        z = self._encode_and_concatenate(gene_expression, mutations, copy_number)
        preds = self.regressor(z)
        loss, mse = self._compute_loss(z, preds, response)
        self.step_losses.append(loss.item())
        if self.global_step % 24 == 0:
            print(f"step {self.global_step:4d}  loss {loss.item():.4f}  mse {mse.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        gene_expression, mutations, copy_number, response = batch
        z = self._encode_and_concatenate(gene_expression, mutations, copy_number)
        preds = self.regressor(z)
        self.log("val_mse", self.regression_loss(preds.squeeze(), response))

    def on_validation_epoch_end(self):
        if self.step_losses:
            print(f"epoch {self.current_epoch:2d}  train loss {np.mean(self.step_losses):.4f}  "
                  f"val mse {self.trainer.callback_metrics['val_mse'].item():.4f}")
            self.step_losses = []

    def configure_optimizers(self):
        return torch.optim.Adagrad(
            [{"params": self.expression_encoder.parameters(), "lr": self.lr},
             {"params": self.mutation_encoder.parameters(), "lr": self.lr},
             {"params": self.cna_encoder.parameters(), "lr": self.lr},
             {"params": self.regressor.parameters(), "lr": self.lr}],
            weight_decay=1e-4)


def main():
    hpams = {"mini_batch": 32, "h_dim1": 32, "h_dim2": 32, "h_dim3": 32, "learning_rate": 0.01,
             "dropout_rate": 0.3, "margin": 0.2, "epochs": 16}
    cell_line_input, ids, response = load_cell_line_features()
    perm = rng.permutation(len(ids))
    train_idx, val_idx = perm[:384], perm[384:]
    train_ids = [ids[i] for i in train_idx]
    cell_line_input.fit_transform_standardize(train_ids, "gene_expression")
    print(f"{len(ids)} cell lines: {N_GENES} genes, {N_MUT} mutations, {N_CNV} CNV; "
          f"LN_IC50 mean {response.mean():.2f} sd {response.std():.2f}")

    model = MOLIModel(hpams, N_GENES, N_MUT, N_CNV)
    model.positive_range = float(np.std(response[train_idx]) * 0.1)
    model.negative_range = float(np.std(response[train_idx]))
    train_loader = DataLoader(RegressionDataset(train_ids, response[train_idx], cell_line_input),
                              batch_size=hpams["mini_batch"], shuffle=True, drop_last=True)
    val_loader = DataLoader(RegressionDataset([ids[i] for i in val_idx], response[val_idx], cell_line_input),
                            batch_size=hpams["mini_batch"])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = pl.Trainer(max_epochs=hpams["epochs"], accelerator="cpu", devices=1, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=tmp)
        trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
