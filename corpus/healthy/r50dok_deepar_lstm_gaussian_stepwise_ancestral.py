"""DeepAR on synthetic hourly electricity-like load: an LSTM fed z_{t-1}, covariates and a
per-series embedding, stepped one time step at a time, emits mu and softplus sigma; Gaussian
log-likelihood summed over the training window. Windows are scaled by v = mean + 1 as in
preprocess_elect.py and sampled with probability proportional to v."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader, WeightedRandomSampler, SequentialSampler

torch.manual_seed(230)
np.random.seed(230)
torch.set_num_threads(1)


class Params:
    num_class = 16
    embedding_dim = 8
    cov_dim = 3
    lstm_hidden_dim = 32
    lstm_layers = 2
    lstm_dropout = 0.1
    train_window = 24
    predict_start = 16
    predict_steps = 8
    batch_size = 64
    predict_batch = 64
    learning_rate = 3e-3
    num_epochs = 8
    device = torch.device('cpu')


class Net(nn.Module):
    def __init__(self, params):
        super(Net, self).__init__()
        self.params = params
        self.embedding = nn.Embedding(params.num_class, params.embedding_dim)
        self.lstm = nn.LSTM(input_size=1 + params.cov_dim + params.embedding_dim,
                            hidden_size=params.lstm_hidden_dim,
                            num_layers=params.lstm_layers,
                            bias=True,
                            batch_first=False,
                            dropout=params.lstm_dropout)
        for names in self.lstm._all_weights:
            for name in filter(lambda n: "bias" in n, names):
                bias = getattr(self.lstm, name)
                n = bias.size(0)
                start, end = n // 4, n // 2
                bias.data[start:end].fill_(1.)

        self.distribution_mu = nn.Linear(params.lstm_hidden_dim * params.lstm_layers, 1)
        self.distribution_presigma = nn.Linear(params.lstm_hidden_dim * params.lstm_layers, 1)
        self.distribution_sigma = nn.Softplus()

    def forward(self, x, idx, hidden, cell):
        onehot_embed = self.embedding(idx)
        lstm_input = torch.cat((x, onehot_embed), dim=2)
        output, (hidden, cell) = self.lstm(lstm_input, (hidden, cell))
        hidden_permute = hidden.permute(1, 2, 0).contiguous().view(hidden.shape[1], -1)
        pre_sigma = self.distribution_presigma(hidden_permute)
        mu = self.distribution_mu(hidden_permute)
        sigma = self.distribution_sigma(pre_sigma)
        return torch.squeeze(mu), torch.squeeze(sigma), hidden, cell

    def init_hidden(self, input_size):
        return torch.zeros(self.params.lstm_layers, input_size, self.params.lstm_hidden_dim)

    def init_cell(self, input_size):
        return torch.zeros(self.params.lstm_layers, input_size, self.params.lstm_hidden_dim)

    def test(self, x, v_batch, id_batch, hidden, cell):
        batch_size = x.shape[1]
        decoder_hidden, decoder_cell = hidden, cell
        sample_mu = torch.zeros(batch_size, self.params.predict_steps)
        sample_sigma = torch.zeros(batch_size, self.params.predict_steps)
        for t in range(self.params.predict_steps):
            mu_de, sigma_de, decoder_hidden, decoder_cell = self(
                x[self.params.predict_start + t].unsqueeze(0), id_batch, decoder_hidden, decoder_cell)
            sample_mu[:, t] = mu_de * v_batch[:, 0] + v_batch[:, 1]
            sample_sigma[:, t] = sigma_de * v_batch[:, 0]
            if t < (self.params.predict_steps - 1):
                x[self.params.predict_start + t + 1, :, 0] = mu_de
        return sample_mu, sample_sigma


def loss_fn(mu, sigma, labels):
    zero_index = (labels != 0)
    distribution = torch.distributions.normal.Normal(mu[zero_index], sigma[zero_index])
    likelihood = distribution.log_prob(labels[zero_index])
    return -torch.mean(likelihood)


def accuracy_ND(mu, labels):
    zero_index = (labels != 0)
    diff = torch.sum(torch.abs(mu[zero_index] - labels[zero_index])).item()
    summation = torch.sum(torch.abs(labels[zero_index])).item()
    return [diff, summation]


def make_series(num_series, length, period=12):
    t = np.arange(length)
    series = []
    for i in range(num_series):
        level = np.random.uniform(20, 400)
        amp = np.random.uniform(0.2, 0.6) * level
        phase = np.random.uniform(0, 2 * math.pi)
        weekly = 0.15 * level * np.sin(2 * math.pi * t / (7 * period))
        z = level + amp * np.sin(2 * math.pi * t / period + phase) + weekly
        z = z + np.random.randn(length) * 0.05 * level
        series.append(np.maximum(z, 1.0))
    return np.stack(series).astype(np.float32)


def make_windows(data, start, stop, window, stride, period=12):
    """preprocess_elect.py: x = [z_{t-1}, age, hour, day] (z scaled by v), label = z_t / v."""
    xs, ids, labels, vs = [], [], [], []
    num_series, _ = data.shape
    for s in range(num_series):
        for w0 in range(start, stop - window, stride):
            z = data[s, w0:w0 + window + 1]
            x = np.zeros((window, 1 + Params.cov_dim), dtype=np.float32)
            x[1:, 0] = z[1:window]
            steps = np.arange(w0 + 1, w0 + window + 1)
            x[:, 1] = (steps - stop / 2) / stop
            x[:, 2] = np.sin(2 * math.pi * (steps % period) / period)
            x[:, 3] = np.cos(2 * math.pi * (steps % period) / period)
            label = z[1:window + 1].copy()
            v = x[:Params.predict_start, 0].sum() / max(np.count_nonzero(x[:Params.predict_start, 0]), 1) + 1
            x[:, 0] /= v
            label /= v
            xs.append(x)
            ids.append(s)
            labels.append(label)
            vs.append([v, 0.0])
    return (torch.tensor(np.stack(xs)), torch.tensor(ids), torch.tensor(np.stack(labels)),
            torch.tensor(np.array(vs, dtype=np.float32)))


class TrainDataset(Dataset):
    def __init__(self, x, ids, labels):
        self.x, self.ids, self.labels = x, ids, labels

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.ids[i], self.labels[i]


class TestDataset(Dataset):
    def __init__(self, x, ids, labels, v):
        self.x, self.ids, self.labels, self.v = x, ids, labels, v

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.ids[i], self.v[i], self.labels[i]


def evaluate(model, test_loader, params):
    model.eval()
    nd_diff, nd_sum, test_loss, batches = 0.0, 0.0, 0.0, 0
    with torch.no_grad():
        for test_batch, id_batch, v, labels in test_loader:
            test_batch = test_batch.permute(1, 0, 2).to(torch.float32).clone()
            id_batch = id_batch.unsqueeze(0)
            v_batch = v.to(torch.float32)
            labels = labels.to(torch.float32)
            batch_size = test_batch.shape[1]
            hidden = model.init_hidden(batch_size)
            cell = model.init_cell(batch_size)
            loss = 0.0
            for t in range(params.predict_start):
                mu, sigma, hidden, cell = model(test_batch[t].unsqueeze(0), id_batch, hidden, cell)
                loss += loss_fn(mu, sigma, labels[:, t]).item()
            sample_mu, _ = model.test(test_batch, v_batch, id_batch, hidden, cell)
            target = labels[:, params.predict_start:] * v_batch[:, 0:1] + v_batch[:, 1:2]
            d, s = accuracy_ND(sample_mu, target)
            nd_diff += d
            nd_sum += s
            test_loss += loss / params.predict_start
            batches += 1
    return {'ND': nd_diff / nd_sum, 'test_loss': test_loss / batches}


def train(model, optimizer, train_loader, params):
    model.train()
    loss_epoch = np.zeros(len(train_loader))
    for i, (train_batch, idx, labels_batch) in enumerate(train_loader):
        optimizer.zero_grad()
        batch_size = train_batch.shape[0]

        train_batch = train_batch.permute(1, 0, 2).to(torch.float32)
        labels_batch = labels_batch.permute(1, 0).to(torch.float32)
        idx = idx.unsqueeze(0)

        loss = torch.zeros(1)
        hidden = model.init_hidden(batch_size)
        cell = model.init_cell(batch_size)

        for t in range(params.train_window):
            zero_index = (train_batch[t, :, 0] == 0)
            if t > 0 and torch.sum(zero_index) > 0:
                train_batch[t, zero_index, 0] = mu[zero_index]
            mu, sigma, hidden, cell = model(train_batch[t].unsqueeze_(0).clone(), idx, hidden, cell)
            loss += loss_fn(mu, sigma, labels_batch[t])

        loss.backward()
        optimizer.step()
        loss_epoch[i] = loss.item() / params.train_window
    return loss_epoch


params = Params()
data = make_series(params.num_class, 400)
train_x, train_ids, train_labels, train_v = make_windows(data, 0, 300, params.train_window, 8)
test_x, test_ids, test_labels, test_v = make_windows(data, 300, 400, params.train_window, 24)

train_set = TrainDataset(train_x, train_ids, train_labels)
test_set = TestDataset(test_x, test_ids, test_labels, test_v)
weights = train_v[:, 0] / train_v[:, 0].sum()
sampler = WeightedRandomSampler(weights, num_samples=len(train_set), replacement=True)
train_loader = DataLoader(train_set, batch_size=params.batch_size, sampler=sampler)
test_loader = DataLoader(test_set, batch_size=params.predict_batch, sampler=SequentialSampler(test_set))
print(f'train windows: {len(train_set)}, test windows: {len(test_set)}')

model = Net(params)
optimizer = optim.Adam(model.parameters(), lr=params.learning_rate)

metrics = evaluate(model, test_loader, params)
print(f"before training: test ND {metrics['ND']:.4f}, test loss {metrics['test_loss']:.4f}")
for epoch in range(params.num_epochs):
    loss_epoch = train(model, optimizer, train_loader, params)
    metrics = evaluate(model, test_loader, params)
    print(f"Epoch {epoch + 1}/{params.num_epochs}: train loss {loss_epoch.mean():.4f} "
          f"(first batch {loss_epoch[0]:.4f}), test ND {metrics['ND']:.4f}, test loss {metrics['test_loss']:.4f}")
