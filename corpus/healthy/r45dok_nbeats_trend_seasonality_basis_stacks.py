"""N-BEATS (trend + seasonality stacks) forecasting a noisy seasonal series from sliding windows,
after philipperemy/n-beats (nbeats_pytorch/model.py and the pytorch trainer example)."""
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
np.random.seed(0)


def squeeze_last_dim(tensor):
    if len(tensor.shape) == 3 and tensor.shape[-1] == 1:
        return tensor[..., 0]
    return tensor


def seasonality_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= thetas.shape[1], "thetas_dim is too big."
    p1, p2 = (p // 2, p // 2) if p % 2 == 0 else (p // 2, p // 2 + 1)
    s1 = torch.tensor(np.array([np.cos(2 * np.pi * i * t) for i in range(p1)])).float()
    s2 = torch.tensor(np.array([np.sin(2 * np.pi * i * t) for i in range(p2)])).float()
    S = torch.cat([s1, s2])
    return thetas.mm(S.to(device))


def trend_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= 4, "thetas_dim is too big."
    T = torch.tensor(np.array([t ** i for i in range(p)])).float()
    return thetas.mm(T.to(device))


def linear_space(backcast_length, forecast_length, is_forecast=True):
    horizon = forecast_length if is_forecast else backcast_length
    return np.arange(0, horizon) / horizon


class Block(nn.Module):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5,
                 share_thetas=False, nb_harmonics=None):
        super(Block, self).__init__()
        self.units = units
        self.thetas_dim = thetas_dim
        self.backcast_length = backcast_length
        self.forecast_length = forecast_length
        self.share_thetas = share_thetas
        self.fc1 = nn.Linear(backcast_length, units)
        self.fc2 = nn.Linear(units, units)
        self.fc3 = nn.Linear(units, units)
        self.fc4 = nn.Linear(units, units)
        self.device = device
        self.backcast_linspace = linear_space(backcast_length, forecast_length, is_forecast=False)
        self.forecast_linspace = linear_space(backcast_length, forecast_length, is_forecast=True)
        if share_thetas:
            self.theta_f_fc = self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
        else:
            self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
            self.theta_f_fc = nn.Linear(units, thetas_dim, bias=False)

    def forward(self, x):
        x = squeeze_last_dim(x)
        x = F.relu(self.fc1(x.to(self.device)))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        x = F.relu(self.fc4(x))
        return x


class SeasonalityBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, nb_harmonics=None):
        if nb_harmonics:
            super(SeasonalityBlock, self).__init__(units, nb_harmonics, device, backcast_length,
                                                   forecast_length, share_thetas=True)
        else:
            super(SeasonalityBlock, self).__init__(units, forecast_length, device, backcast_length,
                                                   forecast_length, share_thetas=True)

    def forward(self, x):
        x = super(SeasonalityBlock, self).forward(x)
        backcast = seasonality_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = seasonality_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast


class TrendBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, nb_harmonics=None):
        super(TrendBlock, self).__init__(units, thetas_dim, device, backcast_length,
                                         forecast_length, share_thetas=True)

    def forward(self, x):
        x = super(TrendBlock, self).forward(x)
        backcast = trend_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = trend_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast


class NBeatsNet(nn.Module):
    SEASONALITY_BLOCK = "seasonality"
    TREND_BLOCK = "trend"

    def __init__(self, device=torch.device("cpu"), stack_types=(TREND_BLOCK, SEASONALITY_BLOCK),
                 nb_blocks_per_stack=3, forecast_length=5, backcast_length=10, thetas_dim=(4, 8),
                 share_weights_in_stack=False, hidden_layer_units=256, nb_harmonics=None):
        super(NBeatsNet, self).__init__()
        self.forecast_length = forecast_length
        self.backcast_length = backcast_length
        self.hidden_layer_units = hidden_layer_units
        self.nb_blocks_per_stack = nb_blocks_per_stack
        self.share_weights_in_stack = share_weights_in_stack
        self.nb_harmonics = nb_harmonics
        self.stack_types = stack_types
        self.thetas_dim = thetas_dim
        self.device = device
        print("| N-Beats")
        self.stacks = nn.ModuleList()
        for stack_id in range(len(self.stack_types)):
            self.stacks.append(self.create_stack(stack_id))
        self.to(self.device)

    def create_stack(self, stack_id):
        stack_type = self.stack_types[stack_id]
        print(f"| --  Stack {stack_type.title()} (#{stack_id}) (share_weights_in_stack={self.share_weights_in_stack})")
        blocks = nn.ModuleList()
        for block_id in range(self.nb_blocks_per_stack):
            block_init = NBeatsNet.select_block(stack_type)
            if self.share_weights_in_stack and block_id != 0:
                block = blocks[-1]
            else:
                block = block_init(self.hidden_layer_units, self.thetas_dim[stack_id], self.device,
                                   self.backcast_length, self.forecast_length, self.nb_harmonics)
            print(f"     | -- {block.__class__.__name__}")
            blocks.append(block)
        return blocks

    @staticmethod
    def select_block(block_type):
        if block_type == NBeatsNet.SEASONALITY_BLOCK:
            return SeasonalityBlock
        return TrendBlock

    def forward(self, backcast):
        backcast = squeeze_last_dim(backcast)
        forecast = torch.zeros(size=(backcast.size()[0], self.forecast_length))
        for stack_id in range(len(self.stacks)):
            for block_id in range(len(self.stacks[stack_id])):
                b, f = self.stacks[stack_id][block_id](backcast)
                backcast = backcast.to(self.device) - b
                forecast = forecast.to(self.device) + f
        return backcast, forecast


def data_generator(x, y, size):
    assert len(x) == len(y)
    batches = []
    for ii in range(0, len(x), size):
        batches.append((x[ii:ii + size], y[ii:ii + size]))
    for batch in batches:
        yield batch


forecast_length = 8
backcast_length = 3 * forecast_length
batch_size = 32

t = np.arange(3000, dtype=np.float64)
series = (0.0004 * t + np.sin(2 * np.pi * t / 24.0) + 0.5 * np.sin(2 * np.pi * t / 7.0)
          + 0.15 * np.random.randn(len(t)))
series = (series - series.mean()) / series.std()

x, y = [], []
for i in range(backcast_length, len(series) - forecast_length):
    x.append(series[i - backcast_length:i])
    y.append(series[i:i + forecast_length])
x = np.array(x, dtype=np.float32)
y = np.array(y, dtype=np.float32)
c = int(len(x) * 0.8)
x_train, y_train = x[:c], y[:c]
x_test, y_test = x[c:], y[c:]

naive = np.repeat(x_test[:, -1:], forecast_length, axis=1)
print(f"naive last-value forecast test mse: {np.mean((naive - y_test) ** 2):.4f}")

net = NBeatsNet(stack_types=(NBeatsNet.TREND_BLOCK, NBeatsNet.SEASONALITY_BLOCK),
                forecast_length=forecast_length, backcast_length=backcast_length,
                thetas_dim=(4, 8), nb_blocks_per_stack=2, hidden_layer_units=64,
                share_weights_in_stack=False)
optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)


def evaluate():
    net.eval()
    with torch.no_grad():
        _, f = net(torch.tensor(x_test))
        test_loss = F.mse_loss(f, torch.tensor(y_test)).item()
    net.train()
    return test_loss


start = time.time()
print(f"epoch 0 | test mse {evaluate():.4f}")
grad_step = 0
for epoch in range(1, 4):
    perm = np.random.permutation(len(x_train))
    losses = []
    for x_batch, y_batch in data_generator(x_train[perm], y_train[perm], batch_size):
        grad_step += 1
        optimiser.zero_grad()
        net.train()
        _, forecast = net(torch.tensor(x_batch))
        loss = F.mse_loss(forecast, torch.tensor(y_batch))
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        if grad_step % 25 == 0:
            print(f"grad_step {grad_step} | train loss {np.mean(losses[-25:]):.4f}")
    print(f"epoch {epoch} | train mse {np.mean(losses):.4f} | test mse {evaluate():.4f}")
print(f"done in {time.time() - start:.1f}s")
