"""Reptile on random sine waves, after John Schulman's reptile-sinewaves demo
(as described in "REPTILE in PyTorch", alok.github.io).

Each outer iteration samples a sine task, runs plain SGD on it for one inner epoch of
minibatches (hand-written param.data update, no torch.optim), then moves the meta weights a
fraction outerstepsize of the way toward the adapted weights through load_state_dict. Progress
is measured on a fixed held-out curve: 32 SGD steps from the meta weights on 10 points, then the
MSE on the whole curve.
"""
import time
from copy import deepcopy

import numpy as np
import torch
from torch import nn

seed = 0
innerstepsize = 0.02  # stepsize in inner SGD
innerepochs = 2  # number of epochs of each inner SGD
outerstepsize0 = 0.5  # stepsize of outer optimization, i.e., meta-optimization
niterations = 1000  # number of outer updates; each iteration we sample one task and update on it

rng = np.random.RandomState(seed)
torch.manual_seed(seed)

# Define task distribution
x_all = np.linspace(-5, 5, 50)[:, None]  # All of the x points
ntrain = 10  # Size of training minibatches


def gen_task():
    "Generate regression problem"
    phase = rng.uniform(low=0, high=2 * np.pi)
    ampl = rng.uniform(0.1, 5)
    f_randomsine = lambda x: np.sin(x + phase) * ampl
    return f_randomsine


# Define model. Reptile paper uses ReLU, but Tanh gives slightly better results
model = nn.Sequential(
    nn.Linear(1, 64),
    nn.Tanh(),
    nn.Linear(64, 64),
    nn.Tanh(),
    nn.Linear(64, 1),
)


def totorch(x):
    return torch.tensor(x, dtype=torch.float32)


def train_on_batch(x, y):
    x = totorch(x)
    y = totorch(y)
    model.zero_grad()
    ypred = model(x)
    loss = (ypred - y).pow(2).mean()
    loss.backward()
    for param in model.parameters():
        param.data -= innerstepsize * param.grad.data
    return loss.item()


def predict(x):
    x = totorch(x)
    return model(x).data.numpy()


def eval_on_curve(f, xtrain, steps=32):
    weights_before = deepcopy(model.state_dict())  # save snapshot before evaluation
    for _ in range(steps):
        train_on_batch(xtrain, f(xtrain))
    lossval = np.square(predict(x_all) - f(x_all)).mean()
    model.load_state_dict(weights_before)  # restore from snapshot
    return lossval


# Choose a fixed task and minibatch for visualization
f_plot = gen_task()
xtrain_plot = x_all[rng.choice(len(x_all), size=ntrain)]

start_time = time.time()
print(f"iteration 0: loss on plotted curve after 32 steps {eval_on_curve(f_plot, xtrain_plot):.3f}")

# Reptile training loop
inner_losses = []
for iteration in range(niterations):
    weights_before = deepcopy(model.state_dict())
    # Generate task
    f = gen_task()
    y_all = f(x_all)
    # Do SGD on this task
    inds = rng.permutation(len(x_all))
    for _ in range(innerepochs):
        for start in range(0, len(x_all), ntrain):
            mbinds = inds[start:start + ntrain]
            inner_losses.append(train_on_batch(x_all[mbinds], y_all[mbinds]))
    # Interpolate between current weights and trained weights from this task
    # I.e. (weights_before - weights_after) is the meta-gradient
    weights_after = model.state_dict()
    outerstepsize = outerstepsize0 * (1 - iteration / niterations)  # linear schedule
    model.load_state_dict({name: weights_before[name] + (weights_after[name] - weights_before[name]) * outerstepsize
                           for name in weights_before})

    if (iteration + 1) % 100 == 0:
        lossval = eval_on_curve(f_plot, xtrain_plot)
        print(f"iteration {iteration + 1}: mean inner loss {np.mean(inner_losses):.3f}  "
              f"loss on plotted curve after 32 steps {lossval:.3f}  outerstepsize {outerstepsize:.4f}")
        inner_losses = []

print(f"done in {time.time() - start_time:.1f}s")
