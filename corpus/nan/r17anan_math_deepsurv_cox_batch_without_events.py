"""DeepSurv (CoxPH MLP) on a readmission cohort: 14 standardised covariates per patient, the
time to readmission in days and an event flag (most patients are censored at the end of
follow-up). The loss is pycox's cox_ph_loss, trained with minibatches of 64 patients.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_FEATURES = 14
BATCH_SIZE = 64
EPOCHS = 8
LR = 1e-3


def make_cohort(n, rng):
    x = rng.normal(0, 1, (n, N_FEATURES)).astype(np.float32)
    risk = 0.8 * x[:, 0] - 0.6 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3] + 0.4 * np.tanh(2 * x[:, 4])
    event_time = rng.exponential(1.0 / (0.0003 * np.exp(risk)))
    censor_time = np.minimum(rng.uniform(20, 400, n), 180.0)
    duration = np.minimum(event_time, censor_time).astype(np.float32)
    event = (event_time <= censor_time).astype(np.float32)
    return x, duration, event


class SurvivalDataset(Dataset):
    def __init__(self, x, duration, event):
        self.x = torch.from_numpy(x)
        self.duration = torch.from_numpy(duration)
        self.event = torch.from_numpy(event)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.duration[i], self.event[i]


class DeepSurv(nn.Module):
    def __init__(self, in_features, hidden=(32, 32), dropout=0.1):
        super().__init__()
        layers, d = [], in_features
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU(), nn.BatchNorm1d(h), nn.Dropout(dropout)]
            d = h
        layers.append(nn.Linear(d, 1, bias=False))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def cox_ph_loss_sorted(log_h, events, eps=1e-7):
    events = events.view(-1)
    log_h = log_h.view(-1)
    gamma = log_h.max()
    log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(eps).log().add(gamma)
    return -log_h.sub(log_cumsum_h).mul(events).sum().div(events.sum())


def cox_ph_loss(log_h, durations, events, eps=1e-7):
    idx = durations.sort(descending=True)[1]
    return cox_ph_loss_sorted(log_h[idx], events[idx], eps)


def concordance_index(risk, duration, event):
    risk, duration, event = np.asarray(risk), np.asarray(duration), np.asarray(event)
    concordant, comparable = 0.0, 0
    for i in np.where(event == 1)[0]:
        later = duration > duration[i]
        comparable += later.sum()
        concordant += (risk[i] > risk[later]).sum() + 0.5 * (risk[i] == risk[later]).sum()
    return concordant / max(comparable, 1)


def main():
    rng = np.random.default_rng(7)
    x, duration, event = make_cohort(2000, rng)
    print(f"cohort: {len(x)} patients, event rate {event.mean():.3f}")
    train_set = SurvivalDataset(x[:1600], duration[:1600], event[:1600])
    val_x, val_t, val_e = x[1600:], duration[1600:], event[1600:]
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, drop_last=True)

    model = DeepSurv(N_FEATURES)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        running = []
        for xb, tb, eb in train_loader:
            log_h = model(xb)
            loss = cox_ph_loss(log_h, tb, eb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running.append(loss.item())
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} events {int(eb.sum())}")
        model.eval()
        with torch.no_grad():
            risk = model(torch.from_numpy(val_x)).view(-1).numpy()
        c_index = concordance_index(risk, val_t, val_e)
        print(f"epoch {epoch} train_loss {np.mean(running):.4f} val_c_index {c_index:.3f}")


if __name__ == "__main__":
    main()
