"""TiDE (Time-series Dense Encoder) forecaster for two targets at once, written after
pytorch-forecasting's TiDEModel: residual MLP encoder/decoder over the flattened lookback
window, projected future covariates and static covariates, a temporal decoder per horizon
step and a linear lookback skip; windows are scaled per series (encoder normalizer) and the
predictions are rescaled into target space before the loss (MAE per target, summed).
Hourly electricity and heating load of 12 buildings with outdoor temperature as a known
future covariate are generated here."""
import numpy as np
import torch
import torch.nn as nn
import lightning.pytorch as pl
from torch.utils.data import DataLoader, Dataset

ENC_LEN, PRED_LEN = 48, 24
TARGETS = ["electricity_kw", "heating_kw"]


def make_buildings(n_buildings=12, hours=24 * 60, seed=0):
    rng = np.random.RandomState(seed)
    t = np.arange(hours)
    series = []
    for b in range(n_buildings):
        office = b % 2 == 0
        temp = 8 + 7 * np.sin(2 * np.pi * (t - 15) / 24) + 4 * np.sin(2 * np.pi * t / (24 * 11)) \
            + rng.randn(hours).cumsum() * 0.05
        hour = t % 24
        weekday = (t // 24) % 7 < 5
        occupied = ((hour >= 8) & (hour < 18) & weekday) if office else ((hour >= 6) & (hour < 23))
        base = rng.uniform(20, 60)
        elec = base * (0.4 + 0.6 * occupied) + 0.6 * np.maximum(temp - 18, 0) * base / 10 \
            + rng.randn(hours) * base * 0.04
        heat = np.maximum(16 - temp, 0) * base / 6 * (0.6 + 0.4 * occupied) + rng.randn(hours) * 1.5
        covs = np.stack([temp / 10, np.sin(2 * np.pi * hour / 24), np.cos(2 * np.pi * hour / 24),
                         weekday.astype(float)], 1)
        series.append((np.stack([elec, heat], 1).astype(np.float32), covs.astype(np.float32),
                       np.array([float(office), base / 60], dtype=np.float32)))
    return series


class WindowDataset(Dataset):
    def __init__(self, series, start, stop, stride):
        self.items = []
        for y, covs, static in series:
            for s in range(start, stop - ENC_LEN - PRED_LEN + 1, stride):
                self.items.append((y, covs, static, s))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        y, covs, static, s = self.items[i]
        enc_y = torch.from_numpy(y[s:s + ENC_LEN])
        center = enc_y.mean(0)
        scale = enc_y.std(0) + 1e-3
        return {
            "encoder_cont": (enc_y - center) / scale,
            "encoder_covs": torch.from_numpy(covs[s:s + ENC_LEN]),
            "decoder_covs": torch.from_numpy(covs[s + ENC_LEN:s + ENC_LEN + PRED_LEN]),
            "static": torch.from_numpy(static),
            "target_scale": torch.stack([center, scale], 1),
            "target": torch.from_numpy(y[s + ENC_LEN:s + ENC_LEN + PRED_LEN]),
        }


class ResidualBlock(nn.Module):
    def __init__(self, input_dim, output_dim, hidden_size, dropout, use_layer_norm):
        super().__init__()
        self.dense = nn.Sequential(nn.Linear(input_dim, hidden_size), nn.ReLU(),
                                   nn.Linear(hidden_size, output_dim), nn.Dropout(dropout))
        self.skip = nn.Linear(input_dim, output_dim)
        self.layer_norm = nn.LayerNorm(output_dim) if use_layer_norm else nn.Identity()

    def forward(self, x):
        return self.layer_norm(self.dense(x) + self.skip(x))


class _TideModule(nn.Module):
    def __init__(self, output_dim, future_cov_dim, static_cov_dim, input_chunk_length,
                 output_chunk_length, hidden_size=64, decoder_output_dim=8,
                 temporal_decoder_hidden=32, temporal_width_future=4, dropout=0.1,
                 use_layer_norm=True):
        super().__init__()
        self.output_dim, self.out_len = output_dim, output_chunk_length
        self.decoder_output_dim = decoder_output_dim
        self.future_cov_projection = ResidualBlock(future_cov_dim, temporal_width_future,
                                                   hidden_size, dropout, use_layer_norm)
        enc_in = input_chunk_length * (output_dim + temporal_width_future) \
            + output_chunk_length * temporal_width_future + static_cov_dim
        self.encoders = nn.Sequential(
            ResidualBlock(enc_in, hidden_size, hidden_size, dropout, use_layer_norm),
            ResidualBlock(hidden_size, hidden_size, hidden_size, dropout, use_layer_norm))
        self.decoders = nn.Sequential(
            ResidualBlock(hidden_size, hidden_size, hidden_size, dropout, use_layer_norm),
            ResidualBlock(hidden_size, decoder_output_dim * output_chunk_length * output_dim,
                          hidden_size, dropout, use_layer_norm))
        self.temporal_decoder = ResidualBlock(decoder_output_dim + temporal_width_future,
                                              output_dim, temporal_decoder_hidden, dropout,
                                              use_layer_norm)
        self.lookback_skip = nn.Linear(input_chunk_length * output_dim,
                                       output_chunk_length * output_dim)

    def forward(self, x_in):
        x, x_future_covariates, x_static_covariates = x_in
        B = x.shape[0]
        hist_covs = x[..., self.output_dim:]
        all_covs = torch.cat([hist_covs, x_future_covariates], dim=1)
        covs_proj = self.future_cov_projection(all_covs)
        encoded = torch.cat([x[..., :self.output_dim].reshape(B, -1),
                             covs_proj.reshape(B, -1), x_static_covariates], dim=1)
        decoded = self.decoders(self.encoders(encoded))
        decoded = decoded.view(B, self.out_len, -1)
        temporal_in = torch.cat([decoded[..., :self.decoder_output_dim],
                                 covs_proj[:, -self.out_len:]], dim=2)
        temporal = self.temporal_decoder(temporal_in)
        skip = self.lookback_skip(x[..., :self.output_dim].reshape(B, -1))
        return temporal + skip.view(B, self.out_len, self.output_dim)


class TiDEModel(pl.LightningModule):
    def __init__(self, target_names, input_chunk_length=ENC_LEN, output_chunk_length=PRED_LEN,
                 future_cov_dim=4, static_cov_dim=2, hidden_size=64, learning_rate=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.target_names = target_names
        self.output_dim = len(target_names)
        self.model = _TideModule(output_dim=self.output_dim, future_cov_dim=future_cov_dim,
                                 static_cov_dim=static_cov_dim,
                                 input_chunk_length=input_chunk_length,
                                 output_chunk_length=output_chunk_length, hidden_size=hidden_size)

    def transform_output(self, prediction, target_scale):
        if isinstance(prediction, list):
            return [p * target_scale[:, i, 1, None] + target_scale[:, i, 0, None]
                    for i, p in enumerate(prediction)]
        return prediction * target_scale[:, None, :, 1] + target_scale[:, None, :, 0]

    def forward(self, x):
        encoder_y = x["encoder_cont"]
        input_vector = torch.cat((encoder_y, x["encoder_covs"]), dim=2)
        x_in = (input_vector, x["decoder_covs"], x["static"])
        prediction = self.model(x_in)

        if self.output_dim > 1:
            prediction = prediction.permute(2, 0, 1)
            prediction = [i.clone().detach().requires_grad_(True) for i in prediction]

        prediction = self.transform_output(prediction, target_scale=x["target_scale"])
        return {"prediction": prediction}

    def loss(self, prediction, target):
        if isinstance(prediction, list):
            return sum((p - target[..., i]).abs().mean() for i, p in enumerate(prediction))
        return (prediction - target).abs().mean()

    def training_step(self, batch, batch_idx):
        out = self(batch)
        loss = self.loss(out["prediction"], batch["target"])
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        out = self(batch)
        loss = self.loss(out["prediction"], batch["target"])
        self.log("val_loss", loss, on_epoch=True)
        for i, name in enumerate(self.target_names):
            mae = (out["prediction"][i] - batch["target"][..., i]).abs().mean()
            self.log(f"val_mae_{name}", mae, on_epoch=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)


class PrintMetrics(pl.Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        m = trainer.callback_metrics
        print(f"epoch {trainer.current_epoch}  train_loss {m['train_loss'].item():.3f}  "
              f"val_loss {m['val_loss'].item():.3f}  "
              + "  ".join(f"{n} {m['val_mae_' + n].item():.3f}" for n in TARGETS))


def main():
    pl.seed_everything(0)
    series = make_buildings()
    hours = len(series[0][0])
    cut = hours - 10 * 24
    train_ds = WindowDataset(series, 0, cut, stride=6)
    val_ds = WindowDataset(series, cut - ENC_LEN, hours, stride=24)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)
    print(f"{len(train_ds)} training windows, {len(val_ds)} validation windows")

    val_naive = np.mean([(b["target"] - b["target_scale"][:, 0]).abs().mean(0).sum().item()
                         for b in (val_ds[i] for i in range(len(val_ds)))])
    print(f"naive (encoder mean) val MAE, summed over targets: {val_naive:.3f}")

    model = TiDEModel(TARGETS)
    trainer = pl.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[PrintMetrics()],
                         gradient_clip_val=0.1)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
