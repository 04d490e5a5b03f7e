"""Neural Process (Garnelo et al. 2018) trained on random sine functions, in the style of
EmilienDupont/neural-processes: deterministic encoder -> mean aggregation -> latent z,
decoder on (x_target, z), loss = -log p(y_target) + KL(q(z|target) || q(z|context))."""
from random import randint, seed as py_seed
from math import pi

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal
from torch.distributions.kl import kl_divergence
from torch.nn import functional as F
from torch.utils.data import Dataset, DataLoader

py_seed(0)
np.random.seed(0)
torch.manual_seed(0)


class SineData(Dataset):
    def __init__(self, amplitude_range=(-1., 1.), shift_range=(-.5, .5), num_samples=800, num_points=100):
        self.num_samples = num_samples
        self.num_points = num_points
        self.x_dim = 1
        self.y_dim = 1
        a_min, a_max = amplitude_range
        b_min, b_max = shift_range
        self.data = []
        for i in range(num_samples):
            a = (a_max - a_min) * np.random.rand() + a_min
            b = (b_max - b_min) * np.random.rand() + b_min
            x = torch.linspace(-pi, pi, num_points).unsqueeze(1)
            y = a * torch.sin(x - b)
            self.data.append((x, y))

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.num_samples


class Encoder(nn.Module):
    def __init__(self, x_dim, y_dim, h_dim, r_dim):
        super(Encoder, self).__init__()
        layers = [nn.Linear(x_dim + y_dim, h_dim), nn.ReLU(inplace=True),
                  nn.Linear(h_dim, h_dim), nn.ReLU(inplace=True),
                  nn.Linear(h_dim, r_dim)]
        self.input_to_hidden = nn.Sequential(*layers)

    def forward(self, x, y):
        input_pairs = torch.cat((x, y), dim=1)
        return self.input_to_hidden(input_pairs)


class MuSigmaEncoder(nn.Module):
    def __init__(self, r_dim, z_dim):
        super(MuSigmaEncoder, self).__init__()
        self.r_to_hidden = nn.Linear(r_dim, r_dim)
        self.hidden_to_mu = nn.Linear(r_dim, z_dim)
        self.hidden_to_sigma = nn.Linear(r_dim, z_dim)

    def forward(self, r):
        hidden = torch.relu(self.r_to_hidden(r))
        mu = self.hidden_to_mu(hidden)
        sigma = 0.1 + 0.9 * torch.sigmoid(self.hidden_to_sigma(hidden))
        return mu, sigma


class Decoder(nn.Module):
    def __init__(self, x_dim, z_dim, h_dim, y_dim):
        super(Decoder, self).__init__()
        layers = [nn.Linear(x_dim + z_dim, h_dim), nn.ReLU(inplace=True),
                  nn.Linear(h_dim, h_dim), nn.ReLU(inplace=True),
                  nn.Linear(h_dim, h_dim), nn.ReLU(inplace=True)]
        self.xz_to_hidden = nn.Sequential(*layers)
        self.hidden_to_mu = nn.Linear(h_dim, y_dim)
        self.hidden_to_sigma = nn.Linear(h_dim, y_dim)

    def forward(self, x, z):
        batch_size, num_points, _ = x.size()
        z = z.unsqueeze(1).repeat(1, num_points, 1)
        x_flat = x.view(batch_size * num_points, -1)
        z_flat = z.view(batch_size * num_points, -1)
        input_pairs = torch.cat((x_flat, z_flat), dim=1)
        hidden = self.xz_to_hidden(input_pairs)
        mu = self.hidden_to_mu(hidden)
        pre_sigma = self.hidden_to_sigma(hidden)
        mu = mu.view(batch_size, num_points, -1)
        pre_sigma = pre_sigma.view(batch_size, num_points, -1)
        sigma = 0.1 + 0.9 * F.softplus(pre_sigma)
        return mu, sigma


class NeuralProcess(nn.Module):
    def __init__(self, x_dim, y_dim, r_dim, z_dim, h_dim):
        super(NeuralProcess, self).__init__()
        self.x_dim = x_dim
        self.y_dim = y_dim
        self.xy_to_r = Encoder(x_dim, y_dim, h_dim, r_dim)
        self.r_to_mu_sigma = MuSigmaEncoder(r_dim, z_dim)
        self.xz_to_y = Decoder(x_dim, z_dim, h_dim, y_dim)

    def aggregate(self, r_i):
        return torch.mean(r_i, dim=1)

    def xy_to_mu_sigma(self, x, y):
        batch_size, num_points, _ = x.size()
        x_flat = x.view(batch_size * num_points, self.x_dim)
        y_flat = y.contiguous().view(batch_size * num_points, self.y_dim)
        r_i_flat = self.xy_to_r(x_flat, y_flat)
        r_i = r_i_flat.view(batch_size, num_points, -1)
        r = self.aggregate(r_i)
        return self.r_to_mu_sigma(r)

    def forward(self, x_context, y_context, x_target, y_target=None):
        if self.training:
            mu_target, sigma_target = self.xy_to_mu_sigma(x_target, y_target)
            mu_context, sigma_context = self.xy_to_mu_sigma(x_context, y_context)
            q_target = Normal(mu_target, sigma_target)
            q_context = Normal(mu_context, sigma_context)
            z_sample = q_target.rsample()
            y_pred_mu, y_pred_sigma = self.xz_to_y(x_target, z_sample)
            p_y_pred = Normal(y_pred_mu, y_pred_sigma)
            return p_y_pred, q_target, q_context
        else:
            mu_context, sigma_context = self.xy_to_mu_sigma(x_context, y_context)
            z_sample = mu_context
            y_pred_mu, y_pred_sigma = self.xz_to_y(x_target, z_sample)
            return Normal(y_pred_mu, y_pred_sigma)


def context_target_split(x, y, num_context, num_extra_target):
    num_points = x.shape[1]
    locations = np.random.choice(num_points, size=num_context + num_extra_target, replace=False)
    x_context = x[:, locations[:num_context], :]
    y_context = y[:, locations[:num_context], :]
    x_target = x[:, locations, :]
    y_target = y[:, locations, :]
    return x_context, y_context, x_target, y_target


class NeuralProcessTrainer():
    def __init__(self, neural_process, optimizer, num_context_range, num_extra_target_range, print_freq=50):
        self.neural_process = neural_process
        self.optimizer = optimizer
        self.num_context_range = num_context_range
        self.num_extra_target_range = num_extra_target_range
        self.print_freq = print_freq
        self.steps = 0
        self.epoch_loss_history = []

    def train(self, data_loader, epochs):
        for epoch in range(epochs):
            epoch_loss = 0.
            self.neural_process.train()
            for i, data in enumerate(data_loader):
                self.optimizer.zero_grad()
                num_context = randint(*self.num_context_range)
                num_extra_target = randint(*self.num_extra_target_range)
                x, y = data
                x_context, y_context, x_target, y_target = \
                    context_target_split(x, y, num_context, num_extra_target)
                p_y_pred, q_target, q_context = \
                    self.neural_process(x_context, y_context, x_target, y_target)
                loss = self._loss(p_y_pred, y_target, q_target, q_context)
                loss.backward()
                self.optimizer.step()
                epoch_loss += loss.item()
                self.steps += 1
                if self.steps % self.print_freq == 0:
                    print("iteration {}, loss {:.3f}".format(self.steps, loss.item()))
            print("Epoch: {}, Avg_loss: {:.4f}".format(epoch, epoch_loss / len(data_loader)))
            self.epoch_loss_history.append(epoch_loss / len(data_loader))

    def _loss(self, p_y_pred, y_target, q_target, q_context):
        log_likelihood = p_y_pred.log_prob(y_target).mean(dim=0).sum()
        kl = kl_divergence(q_target, q_context).mean(dim=0).sum()
        return -log_likelihood + kl


@torch.no_grad()
def evaluate(model, dataset, n_context=10):
    model.eval()
    x = torch.stack([dataset[i][0] for i in range(64)])
    y = torch.stack([dataset[i][1] for i in range(64)])
    locations = np.random.choice(x.shape[1], size=n_context, replace=False)
    p_y = model(x[:, locations], y[:, locations], x)
    return F.mse_loss(p_y.loc, y).item()


dataset = SineData(amplitude_range=(-1., 1.), shift_range=(-.5, .5), num_samples=800)
test_dataset = SineData(amplitude_range=(-1., 1.), shift_range=(-.5, .5), num_samples=64)
data_loader = DataLoader(dataset, batch_size=16, shuffle=True)

neuralprocess = NeuralProcess(x_dim=1, y_dim=1, r_dim=50, z_dim=50, h_dim=50)
optimizer = torch.optim.Adam(neuralprocess.parameters(), lr=3e-3)
np_trainer = NeuralProcessTrainer(neuralprocess, optimizer,
                                  num_context_range=(3, 20), num_extra_target_range=(0, 20),
                                  print_freq=50)

print("test MSE (10 context points) before training: {:.4f}".format(evaluate(neuralprocess, test_dataset)))
np_trainer.train(data_loader, epochs=8)
print("test MSE (10 context points) after training: {:.4f}".format(evaluate(neuralprocess, test_dataset)))
