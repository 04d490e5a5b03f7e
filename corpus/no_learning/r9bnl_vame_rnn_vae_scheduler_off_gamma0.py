"""VAME-style recurrent variational autoencoder for animal pose time series.

A bidirectional GRU encoder maps a window of egocentrically aligned keypoints to a latent
vector; one GRU decoder reconstructs the window and a second one predicts the next frames
(the VAME "future decoder"). Loss = reconstruction MSE + future-prediction MSE + annealed KL.

Synthetic data: 6 keypoints (12 coordinates) driven by a few latent oscillators whose
frequency switches between behavioural "motifs" over time. The config mirrors VAME's
config.yaml; `scheduler` is switched off for this run.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as Data
from torch.optim.lr_scheduler import StepLR

cfg = {
    "time_window": 20,
    "prediction_steps": 8,
    "num_features": 12,
    "zdims": 8,
    "batch_size": 128,
    "max_epochs": 180,
    "learning_rate": 5e-3,
    "beta": 0.1,
    "kl_start": 2,
    "annealtime": 4,
    "anneal_function": "linear",
    "scheduler": 0,
    "scheduler_step_size": 100,
    "scheduler_gamma": 0.2,
    "hidden_size_layer_1": 32,
    "hidden_size_layer_2": 32,
    "hidden_size_rec": 32,
    "hidden_size_pred": 32,
}


def make_pose_data(n_frames, num_features, seed=0):
    rng = np.random.RandomState(seed)
    t = np.arange(n_frames)
    motif = np.repeat(rng.randint(0, 3, n_frames // 60 + 1), 60)[:n_frames]
    freq = np.array([0.05, 0.12, 0.25])[motif]
    phase = np.cumsum(2 * np.pi * freq)
    mix = rng.randn(4, num_features)
    latents = np.stack([np.sin(phase), np.cos(phase), np.sin(2 * phase), 0.3 * np.sin(0.01 * t)])
    x = latents.T @ mix + 0.05 * rng.randn(n_frames, num_features)
    x = (x - x.mean(0)) / x.std(0)
    return x.astype(np.float32)


class SEQUENCE_DATASET(Data.Dataset):
    def __init__(self, data, temporal_window, future_steps, n_samples, seed):
        self.data = data
        self.temporal_window = temporal_window + future_steps
        rng = np.random.RandomState(seed)
        self.starts = rng.randint(0, len(data) - self.temporal_window, size=n_samples)

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, idx):
        s = self.starts[idx]
        return torch.from_numpy(self.data[s:s + self.temporal_window])


class Encoder(nn.Module):
    def __init__(self, num_features, h1, h2):
        super().__init__()
        self.encoder_rnn = nn.GRU(input_size=num_features, hidden_size=h1, num_layers=2, bias=True,
                                  batch_first=True, bidirectional=True)
        self.hidden_factor = 2 * 2

    def forward(self, inputs):
        _, hidden = self.encoder_rnn(inputs)
        return torch.cat([hidden[i] for i in range(self.hidden_factor)], dim=1)


class Lambda(nn.Module):
    def __init__(self, zdims, hidden_size_layer_1):
        super().__init__()
        self.hid_dim = hidden_size_layer_1 * 4
        self.hidden_to_mean = nn.Linear(self.hid_dim, zdims)
        self.hidden_to_logvar = nn.Linear(self.hid_dim, zdims)

    def forward(self, hidden):
        self.mean = self.hidden_to_mean(hidden)
        self.logvar = self.hidden_to_logvar(hidden)
        std = torch.exp(0.5 * self.logvar)
        eps = torch.randn_like(std)
        return eps.mul(std).add_(self.mean), self.mean, self.logvar


class Decoder(nn.Module):
    def __init__(self, steps, zdims, num_features, hidden_size):
        super().__init__()
        self.steps = steps
        self.rnn = nn.GRU(zdims, hidden_size, num_layers=1, batch_first=True)
        self.hidden_to_output = nn.Linear(hidden_size, num_features)

    def forward(self, z):
        inputs = z.unsqueeze(1).repeat(1, self.steps, 1)
        out, _ = self.rnn(inputs)
        return self.hidden_to_output(out)


class RNN_VAE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.encoder = Encoder(c["num_features"], c["hidden_size_layer_1"], c["hidden_size_layer_2"])
        self.lmbda = Lambda(c["zdims"], c["hidden_size_layer_1"])
        self.decoder = Decoder(c["time_window"], c["zdims"], c["num_features"], c["hidden_size_rec"])
        self.decoder_future = Decoder(c["prediction_steps"], c["zdims"], c["num_features"], c["hidden_size_pred"])

    def forward(self, seq):
        h_n = self.encoder(seq)
        z, mu, logvar = self.lmbda(h_n)
        return self.decoder(z), self.decoder_future(z), z, mu, logvar


def kl_annealing(epoch, kl_start, annealtime, function):
    if epoch > kl_start:
        if function == "linear":
            return min((epoch - kl_start) / annealtime, 1)
        return float(1 / (1 + np.exp(-0.9 * (epoch - annealtime))))
    return 0


def train(train_loader, epoch, model, optimizer, beta, kl_weight, time_window, future_steps):
    model.train()
    train_loss = 0.0
    for idx, data_item in enumerate(train_loader):
        data = data_item[:, :time_window, :]
        fut = data_item[:, time_window:time_window + future_steps, :]
        data_tilde, future, latent, mu, logvar = model(data)
        rec_loss = nn.functional.mse_loss(data_tilde, data, reduction="mean")
        fut_rec_loss = nn.functional.mse_loss(future, fut, reduction="mean")
        kl_loss = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        loss = rec_loss + fut_rec_loss + beta * kl_weight * kl_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
    return train_loss / len(train_loader), rec_loss.item(), fut_rec_loss.item()


@torch.no_grad()
def test(test_loader, model, time_window):
    model.eval()
    total = 0.0
    for data_item in test_loader:
        data = data_item[:, :time_window, :]
        data_tilde, _, _, _, _ = model(data)
        total += nn.functional.mse_loss(data_tilde, data).item()
    return total / len(test_loader)


def train_model():
    torch.manual_seed(0)
    c = cfg
    series = make_pose_data(6000, c["num_features"])
    trainset = SEQUENCE_DATASET(series[:5000], c["time_window"], c["prediction_steps"], 128, seed=1)
    testset = SEQUENCE_DATASET(series[5000:], c["time_window"], c["prediction_steps"], 128, seed=2)
    train_loader = Data.DataLoader(trainset, batch_size=c["batch_size"], shuffle=True, drop_last=True)
    test_loader = Data.DataLoader(testset, batch_size=c["batch_size"], shuffle=False)

    model = RNN_VAE(c)
    optimizer = torch.optim.Adam(model.parameters(), lr=c["learning_rate"], amsgrad=True)
    if c["scheduler"]:
        scheduler = StepLR(optimizer, step_size=c["scheduler_step_size"], gamma=c["scheduler_gamma"], last_epoch=-1)
    else:
        scheduler = StepLR(optimizer, step_size=c["scheduler_step_size"], gamma=0, last_epoch=-1)

    t0 = time.time()
    for epoch in range(1, c["max_epochs"] + 1):
        weight = kl_annealing(epoch, c["kl_start"], c["annealtime"], c["anneal_function"])
        loss, rec, fut = train(train_loader, epoch, model, optimizer, c["beta"], weight,
                               c["time_window"], c["prediction_steps"])
        scheduler.step()
        if epoch % 20 == 0:
            test_loss = test(test_loader, model, c["time_window"])
            print("Epoch: %d  Train loss: %.4f  MSE-Loss: %.4f  MSE-Future-Loss: %.4f  Test loss: %.4f  lr: %.2e  (%.1fs)"
                  % (epoch, loss, rec, fut, test_loss, optimizer.param_groups[0]["lr"], time.time() - t0))


if __name__ == "__main__":
    train_model()
