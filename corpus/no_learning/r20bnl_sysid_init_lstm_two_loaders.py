"""Multi-step ship motion model: an LSTM initialiser + LSTM predictor trained jointly.

The initialiser reads a window of past controls and states and produces the initial (h, c) of
the predictor, which then simulates the next window of states from the controls alone
(deepsysid-style LSTMInitModel, combined training of both networks with one optimizer).
Data: simulated 3-DOF patrol-ship runs, states = surge speed, sway speed, yaw rate;
controls = propeller command, rudder angle.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils import data

SEQUENCE_LENGTH = 50
BATCH_SIZE = 16
EPOCHS = 15
LEARNING_RATE = 3e-3
RECURRENT_DIM = 48


def simulate_ship(rng, n_steps):
    """Euler-integrated surge/sway/yaw model driven by random step commands."""
    control = np.zeros((n_steps, 2))
    state = np.zeros((n_steps, 3))
    prop, rudder = rng.uniform(0.2, 1.0), rng.uniform(-0.5, 0.5)
    hold = 0
    s, v, r = 0.6, 0.0, 0.0
    for t in range(n_steps):
        if hold == 0:
            prop = float(np.clip(prop + rng.normal(0, 0.35), 0.0, 1.2))
            rudder = float(np.clip(rng.normal(0, 0.45), -0.7, 0.7))
            hold = int(rng.integers(3, 10))
        hold -= 1
        control[t] = (prop, rudder)
        state[t] = (s, v, r)
        ds = (-s - 0.4 * s * abs(s) + 1.6 * prop) / 200.0
        dr = (-r + 0.9 * rudder * s) / 90.0
        dv = (-v - 0.8 * r * s) / 120.0
        s, v, r = s + ds, v + dv, r + dr
    state += rng.normal(0, 0.003, size=state.shape)
    return control, state


def mean_stddev(seqs):
    stacked = np.vstack(seqs)
    return stacked.mean(axis=0), stacked.std(axis=0)


class InitializerDataset(data.Dataset):
    # x = [control state], y = [state one step ahead]
    def __init__(self, control_seqs, state_seqs, sequence_length):
        xs, ys = [], []
        for control, state in zip(control_seqs, state_seqs):
            n_samples = (control.shape[0] - sequence_length - 1) // sequence_length
            for idx in range(n_samples):
                t = idx * sequence_length
                xs.append(np.hstack((control[t + 1:t + 1 + sequence_length], state[t:t + sequence_length])))
                ys.append(state[t + 1:t + 1 + sequence_length])
        self.x = np.stack(xs).astype(np.float32)
        self.y = np.stack(ys).astype(np.float32)

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, idx):
        return {"x": self.x[idx], "y": self.y[idx]}


class PredictorDataset(data.Dataset):
    # x0 = [control state] of the window before, x = control, y = state of the predicted window
    def __init__(self, control_seqs, state_seqs, sequence_length):
        x0s, xs, ys = [], [], []
        for control, state in zip(control_seqs, state_seqs):
            n_samples = (control.shape[0] - 2 * sequence_length) // sequence_length
            for idx in range(n_samples):
                t = idx * sequence_length
                x0s.append(np.hstack((control[t:t + sequence_length], state[t:t + sequence_length])))
                xs.append(control[t + sequence_length:t + 2 * sequence_length])
                ys.append(state[t + sequence_length:t + 2 * sequence_length])
        self.x0 = np.stack(x0s).astype(np.float32)
        self.x = np.stack(xs).astype(np.float32)
        self.y = np.stack(ys).astype(np.float32)

    def __len__(self):
        return self.x0.shape[0]

    def __getitem__(self, idx):
        return {"x0": self.x0[idx], "x": self.x[idx], "y": self.y[idx]}


class InitLSTM(nn.Module):
    def __init__(self, input_dim, recurrent_dim, output_dim):
        super().__init__()
        self.init_lstm = nn.LSTM(input_dim + output_dim, recurrent_dim, batch_first=True)
        self.predictor_lstm = nn.LSTM(input_dim, recurrent_dim, batch_first=True)
        self.output_layer = nn.Linear(recurrent_dim, output_dim, bias=False)
        self.init_layer = nn.Linear(recurrent_dim, output_dim, bias=False)
        for name, param in self.named_parameters():
            if "weight" in name:
                nn.init.xavier_normal_(param)

    def forward(self, control, x0):
        h_init, (h0, c0) = self.init_lstm(x0)
        h, _ = self.predictor_lstm(control, (h0, c0))
        return self.output_layer(h), self.init_layer(h_init)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    runs = [simulate_ship(rng, 1000) for _ in range(14)]
    control_seqs = [c for c, _ in runs]
    state_seqs = [s for _, s in runs]
    train_c, val_c = control_seqs[:12], control_seqs[12:]
    train_s, val_s = state_seqs[:12], state_seqs[12:]

    control_mean, control_std = mean_stddev(train_c)
    state_mean, state_std = mean_stddev(train_s)
    train_c = [(c - control_mean) / control_std for c in train_c]
    train_s = [(s - state_mean) / state_std for s in train_s]
    val_c = [(c - control_mean) / control_std for c in val_c]
    val_s = [(s - state_mean) / state_std for s in val_s]

    initializer_dataset = InitializerDataset(train_c, train_s, SEQUENCE_LENGTH)
    predictor_dataset = PredictorDataset(train_c, train_s, SEQUENCE_LENGTH)
    val_dataset = PredictorDataset(val_c, val_s, SEQUENCE_LENGTH)
    print(f"initializer windows {len(initializer_dataset)}, predictor windows {len(predictor_dataset)}, "
          f"validation windows {len(val_dataset)}")

    model = InitLSTM(input_dim=2, recurrent_dim=RECURRENT_DIM, output_dim=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    criterion = nn.MSELoss()

    time_start = time.time()
    for epoch in range(EPOCHS):
        model.train()
        data_loader_init = data.DataLoader(initializer_dataset, BATCH_SIZE, shuffle=True, drop_last=True)
        data_loader_pred = data.DataLoader(predictor_dataset, BATCH_SIZE, shuffle=True, drop_last=True)
        total_loss = 0.0
        for batch_idx, (batch_init, batch_pred) in enumerate(zip(data_loader_init, data_loader_pred)):
            optimizer.zero_grad()
            y, h0 = model(batch_pred["x"], x0=batch_init["x"])
            batch_loss_init = criterion(h0, batch_init["y"])
            batch_loss_pred = criterion(y, batch_pred["y"])
            batch_loss = batch_loss_init + batch_loss_pred
            total_loss += batch_loss.item()
            batch_loss.backward()
            optimizer.step()

        model.eval()
        with torch.no_grad():
            val_x0 = torch.from_numpy(val_dataset.x0)
            val_x = torch.from_numpy(val_dataset.x)
            val_y = torch.from_numpy(val_dataset.y)
            val_pred, _ = model(val_x, x0=val_x0)
            val_mse = criterion(val_pred, val_y).item()
        print(f"Epoch {epoch + 1}/{EPOCHS}\tEpoch Loss: {total_loss:.3f}\tInit Loss: {batch_loss_init.item():.4f}\t"
              f"Prediction Loss: {batch_loss_pred.item():.4f}\tValidation MSE: {val_mse:.4f}")
    print(f"Training time {time.time() - time_start:.1f}s")


if __name__ == "__main__":
    main()
