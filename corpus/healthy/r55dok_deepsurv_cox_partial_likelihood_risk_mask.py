"""DeepSurv on simulated linear survival data: an MLP predicts a log-risk and is
trained with the Cox negative log partial likelihood over the whole training set as one batch;
the concordance index is reported on train and validation data."""
import configparser
import tempfile
import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

CONFIG_TEXT = """
[train]
epochs = 150
learning_rate = 2.922e-3
lr_decay_rate = 3.579e-4
optimizer = 'Adam'

[network]
drop = 0.375
norm = True
dims = [10, 4, 1]
activation = 'SELU'
l2_reg = 0
"""


def read_config(ini_file):
    def _build_dict(items):
        return {item[0]: eval(item[1]) for item in items}
    cf = configparser.ConfigParser()
    cf.read(ini_file)
    return {sec: _build_dict(cf.items(sec)) for sec in cf.sections()}


def simulate_linear(n, d=10, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1, 1, size=(n, d)).astype(np.float32)
    log_hr = 1.0 * X[:, 0] + 2.0 * X[:, 1]
    u = rng.uniform(size=n)
    t = -np.log(u) / (0.1 * np.exp(log_hr))
    censor_time = np.quantile(t, 0.9)
    e = (t <= censor_time).astype(np.float32)
    t = np.minimum(t, censor_time).astype(np.float32)
    return X, t.reshape(-1, 1), e.reshape(-1, 1)


class SurvivalDataset(Dataset):
    def __init__(self, X, y, e):
        self.X = torch.from_numpy(X)
        self.y = torch.from_numpy(y)
        self.e = torch.from_numpy(e)

    def __len__(self):
        return self.X.shape[0]

    def __getitem__(self, i):
        return self.X[i], self.y[i], self.e[i]


class Regularization(object):
    def __init__(self, order, weight_decay):
        self.order = order
        self.weight_decay = weight_decay

    def __call__(self, model):
        reg_loss = 0
        for name, w in model.named_parameters():
            if 'weight' in name:
                reg_loss = reg_loss + torch.norm(w, p=self.order)
        return self.weight_decay * reg_loss


class DeepSurv(nn.Module):
    def __init__(self, config):
        super(DeepSurv, self).__init__()
        self.drop = config['drop']
        self.norm = config['norm']
        self.dims = config['dims']
        self.activation = config['activation']
        self.model = self._build_network()

    def _build_network(self):
        layers = []
        for i in range(len(self.dims) - 1):
            if i and self.drop is not None:
                layers.append(nn.Dropout(self.drop))
            layers.append(nn.Linear(self.dims[i], self.dims[i + 1]))
            if self.norm:
                layers.append(nn.BatchNorm1d(self.dims[i + 1]))
            layers.append(getattr(nn, self.activation)())
        return nn.Sequential(*layers)

    def forward(self, X):
        return self.model(X)


class NegativeLogLikelihood(nn.Module):
    def __init__(self, config):
        super(NegativeLogLikelihood, self).__init__()
        self.L2_reg = config['l2_reg']
        self.reg = Regularization(order=2, weight_decay=self.L2_reg)

    def forward(self, risk_pred, y, e, model):
        mask = torch.ones(y.shape[0], y.shape[0])
        mask[(y.T - y) > 0] = 0
        log_loss = torch.exp(risk_pred) * mask
        log_loss = torch.sum(log_loss, dim=0) / torch.sum(mask, dim=0)
        log_loss = torch.log(log_loss).reshape(-1, 1)
        neg_log_loss = -torch.sum((risk_pred - log_loss) * e) / torch.sum(e)
        l2_loss = self.reg(model)
        return neg_log_loss + l2_loss


def c_index(risk_pred, y, e):
    risk_pred = risk_pred.detach().reshape(-1)
    y = y.reshape(-1)
    e = e.reshape(-1)
    comparable = (y.unsqueeze(1) < y.unsqueeze(0)) & (e.unsqueeze(1) > 0)
    concordant = (risk_pred.unsqueeze(1) < risk_pred.unsqueeze(0)).float()
    ties = (risk_pred.unsqueeze(1) == risk_pred.unsqueeze(0)).float()
    score = (concordant + 0.5 * ties)[comparable]
    return score.mean().item()


def adjust_learning_rate(optimizer, epoch, lr, lr_decay_rate):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr / (1 + epoch * lr_decay_rate)
    return optimizer.param_groups[0]['lr']


def train(ini_file):
    config = read_config(ini_file)
    model = DeepSurv(config['network'])
    criterion = NegativeLogLikelihood(config['network'])
    optimizer = getattr(optim, config['train']['optimizer'])(
        model.parameters(), lr=config['train']['learning_rate'])
    X, y, e = simulate_linear(640, seed=0)
    train_dataset = SurvivalDataset(X[:480], y[:480], e[:480])
    test_dataset = SurvivalDataset(X[480:], y[480:], e[480:])
    train_loader = DataLoader(train_dataset, batch_size=len(train_dataset))
    test_loader = DataLoader(test_dataset, batch_size=len(test_dataset))
    best_c_index = 0
    for epoch in range(1, config['train']['epochs'] + 1):
        lr = adjust_learning_rate(optimizer, epoch, config['train']['learning_rate'],
                                  config['train']['lr_decay_rate'])
        model.train()
        for X_b, y_b, e_b in train_loader:
            risk_pred = model(X_b)
            train_loss = criterion(risk_pred, y_b, e_b, model)
            train_c = c_index(-risk_pred, y_b, e_b)
            optimizer.zero_grad()
            train_loss.backward()
            optimizer.step()
        model.eval()
        for X_b, y_b, e_b in test_loader:
            with torch.no_grad():
                risk_pred = model(X_b)
                valid_loss = criterion(risk_pred, y_b, e_b, model)
                valid_c = c_index(-risk_pred, y_b, e_b)
                best_c_index = max(best_c_index, valid_c)
        if epoch == 1 or epoch % 15 == 0:
            print('Epoch: {}\tLoss: {:.6f}({:.6f})\tc-index: {:.4f}({:.4f})\tlr: {:g}'.format(
                epoch, train_loss.item(), valid_loss.item(), train_c, valid_c, lr))
    return best_c_index


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as tmp:
        ini_file = os.path.join(tmp, 'linear.ini')
        with open(ini_file, 'w') as f:
            f.write(CONFIG_TEXT)
        best = train(ini_file)
    print('The best valid c-index: {:.4f}'.format(best))
