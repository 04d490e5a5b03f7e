"""Heteroscedastic regression with MC-Dropout, after lightning-uq-box's MCDropoutRegression:
an MLP with dropout outputs a mean and a log-variance, is trained with MSE on the mean for a
burn-in epoch and then with the Gaussian negative log-likelihood; predictions average
num_mc_samples stochastic forward passes with the dropout layers switched back on."""
import math
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


def toy_heteroscedastic(n, g):
    x = torch.rand(n, 1, generator=g) * 8 - 4
    noise_std = 0.1 + 0.4 * (x + 4) / 8
    y = torch.sin(x) * 2 + 0.3 * x + noise_std * torch.randn(n, 1, generator=g)
    return x, y


class NLL(nn.Module):
    def forward(self, preds, target):
        mu, log_sigma_2 = preds[:, 0:1], preds[:, 1:2]
        loss = 0.5 * (log_sigma_2 + (target - mu) ** 2 * torch.exp(-log_sigma_2))
        return loss.mean()


class MLP(nn.Module):
    def __init__(self, n_inputs=1, n_hidden=(64, 64), n_outputs=2, dropout_p=0.1):
        super().__init__()
        layers = []
        last = n_inputs
        for h in n_hidden:
            layers += [nn.Linear(last, h), nn.ReLU(), nn.Dropout(dropout_p)]
            last = h
        layers.append(nn.Linear(last, n_outputs))
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


def find_dropout_layers(model):
    return [name for name, m in model.named_modules() if isinstance(m, nn.Dropout)]


def activate_dropout(model, dropout_layer_names):
    for name, module in model.named_modules():
        if name in dropout_layer_names:
            module.train()


@torch.no_grad()
def predict(model, X, num_mc_samples, dropout_layer_names):
    model.eval()
    activate_dropout(model, dropout_layer_names)
    preds = torch.stack([model(X) for _ in range(num_mc_samples)], dim=-1)
    mean_samples = preds[:, 0, :]
    mean = mean_samples.mean(-1)
    epistemic = mean_samples.std(-1)
    aleatoric = torch.exp(preds[:, 1, :]).mean(-1).sqrt()
    pred_uct = torch.sqrt(epistemic ** 2 + aleatoric ** 2)
    return mean, pred_uct


g = torch.Generator().manual_seed(1)
X_train, y_train = toy_heteroscedastic(2000, g)
X_val, y_val = toy_heteroscedastic(500, g)
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)

model = MLP()
dropout_layer_names = find_dropout_layers(model)
loss_fn = NLL()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
burnin_epochs = 1
num_mc_samples = 25

for epoch in range(6):
    model.train()
    total, n = 0.0, 0
    for x, y in train_loader:
        out = model(x)
        if epoch < burnin_epochs:
            loss = nn.functional.mse_loss(out[:, 0:1], y)
        else:
            loss = loss_fn(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        n += 1
    mean, std = predict(model, X_val, num_mc_samples, dropout_layer_names)
    rmse = torch.sqrt(((mean - y_val[:, 0]) ** 2).mean()).item()
    gauss_nll = (0.5 * torch.log(2 * math.pi * std ** 2) + (y_val[:, 0] - mean) ** 2 / (2 * std ** 2)).mean().item()
    coverage = ((y_val[:, 0] - mean).abs() < 1.645 * std).float().mean().item()
    print(f"epoch {epoch}: train loss {total / n:.4f}  val RMSE {rmse:.3f}  val NLL {gauss_nll:.3f}  "
          f"90% coverage {coverage:.3f}")
