"""Population disaggregation ("pomelo"-style, after jvargasmu/population_estimation): census
counts are only known per administrative region, so a pixel-wise network (1x1 convolutions =
an MLP per pixel) predicts an occupancy rate from remote-sensing covariates, the population
of a pixel is buildings * occupancy rate, and the loss compares the sum over each region's
pixels with the region's census count.

Covariates, building counts, regions and census counts are generated here: a 96x96 raster
with 5 covariate channels, 60 rectangular admin units.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(9)
np.random.seed(1)

params = {"lr": 1e-4, "epochs": 4, "hidden_neurons": 128, "weights_regularizer": 0.001,
          "validation_fold": 10}


def make_country(H=96, W=96, n_regions=60):
    rng = np.random.default_rng(11)
    yy, xx = np.mgrid[0:H, 0:W] / H
    towns = rng.uniform(0, 1, size=(6, 2))
    urban = sum(np.exp(-((yy - ty) ** 2 + (xx - tx) ** 2) / 0.01) for ty, tx in towns)
    nightlights = urban + 0.05 * rng.standard_normal((H, W))
    landcover_builtup = np.clip(urban + 0.1 * rng.standard_normal((H, W)), 0, None)
    dist_road = np.abs(np.sin(6 * xx) + np.cos(5 * yy)) + 0.1 * rng.random((H, W))
    elevation = yy + 0.3 * np.sin(3 * xx) + 0.05 * rng.standard_normal((H, W))
    buildings = rng.poisson(2 + 40 * urban).astype(np.float32)
    covariates = np.stack([nightlights, landcover_builtup, dist_road, elevation], 0)
    occrate = 2.5 + 3.0 * np.tanh(nightlights) - 0.8 * dist_road
    pop = buildings * np.clip(occrate, 0.3, None)

    # admin units: random rectangles tiling the raster
    edges_y = np.sort(rng.choice(np.arange(8, H - 8), size=5, replace=False))
    edges_x = np.sort(rng.choice(np.arange(8, W - 8), size=9, replace=False))
    ys = np.concatenate([[0], edges_y, [H]])
    xs = np.concatenate([[0], edges_x, [W]])
    masks, census = [], []
    for i in range(len(ys) - 1):
        for j in range(len(xs) - 1):
            m = np.zeros((H, W), dtype=bool)
            m[ys[i]:ys[i + 1], xs[j]:xs[j + 1]] = True
            masks.append(m)
            census.append(pop[m].sum() * rng.uniform(0.95, 1.05))
    inputs = np.concatenate([buildings[None], covariates], 0).astype(np.float32)
    return torch.from_numpy(inputs), [torch.from_numpy(m) for m in masks], torch.tensor(census, dtype=torch.float32)


class PixScaleNet(nn.Module):
    def __init__(self, channels_in=5, hidden_neurons=128, weights_regularizer=0.001):
        super(PixScaleNet, self).__init__()
        self.channels_in = channels_in - 1
        self.occratenet = nn.Sequential(
            nn.Conv2d(self.channels_in, hidden_neurons, (1, 1), padding=0), nn.ReLU(inplace=True),
            nn.Conv2d(hidden_neurons, hidden_neurons, (1, 1), padding=0), nn.ReLU(inplace=True),
            nn.Conv2d(hidden_neurons, hidden_neurons, (1, 1), padding=0), nn.ReLU(inplace=True))
        self.occrate_layer = nn.Sequential(nn.Conv2d(hidden_neurons, 1, (1, 1), padding=0), nn.ReLU(inplace=True))
        self.params_with_regularizer = []
        self.params_with_regularizer += [{'params': self.occratenet.parameters(), 'weight_decay': weights_regularizer}]
        self.params_with_regularizer += [{'params': self.occrate_layer.parameters(), 'weight_decay': weights_regularizer}]

    def forward(self, inputs, mask=None, predict_map=False):
        if mask is not None and not predict_map:
            inputs = inputs[:, :, mask].unsqueeze(3)
        buildings = inputs[:, 0:1, :, :]
        data = inputs[:, 1:, :, :]
        feats = self.occratenet(data)
        occrate = self.occrate_layer(feats)
        pop_est = torch.mul(buildings, occrate)
        if predict_map:
            return pop_est, occrate
        return pop_est.sum()


inputs, masks, census = make_country()
# normalise the covariate channels (not the building counts)
mean = inputs[1:].mean(dim=(1, 2), keepdim=True)
std = inputs[1:].std(dim=(1, 2), keepdim=True)
inputs[1:] = (inputs[1:] - mean) / std
inputs = inputs.unsqueeze(0)

idx = np.random.permutation(len(masks))
val_idx = idx[:params["validation_fold"]]
train_idx = idx[params["validation_fold"]:]
print(f"{len(masks)} admin regions: {len(train_idx)} train / {len(val_idx)} validation, "
      f"census mean {census.mean():.0f}")

mynet = PixScaleNet(channels_in=inputs.shape[1], hidden_neurons=params["hidden_neurons"],
                    weights_regularizer=params["weights_regularizer"])
optimizer = torch.optim.Adam(mynet.params_with_regularizer, lr=params["lr"])
myloss = torch.nn.L1Loss()


def evaluate(region_ids):
    mynet.eval()
    with torch.no_grad():
        preds = torch.stack([mynet(inputs, masks[i]) for i in region_ids])
    mynet.train()
    gt = census[region_ids]
    mae = (preds - gt).abs().mean().item()
    r2 = 1 - ((preds - gt) ** 2).sum().item() / ((gt - gt.mean()) ** 2).sum().item()
    return mae, r2


it = 0
for epoch in range(params["epochs"]):
    epoch_loss = []
    for i in np.random.permutation(train_idx):
        optimizer.zero_grad()
        pop_pred = mynet(inputs, masks[i])
        loss = myloss(pop_pred, census[i])
        loss.backward()
        optimizer.step()
        epoch_loss.append(loss.item())
        it += 1
        if it % 10 == 0:
            print(f"it {it:4d}  region {i:2d}  census {census[i]:8.0f}  pred {pop_pred.item():8.1f}  "
                  f"L1 {np.mean(epoch_loss[-10:]):.1f}")
    train_mae, train_r2 = evaluate(train_idx)
    val_mae, val_r2 = evaluate(val_idx)
    print(f"epoch {epoch}: train MAE {train_mae:.1f} R2 {train_r2:.3f} | val MAE {val_mae:.1f} R2 {val_r2:.3f}")
