# MAML on sine-wave regression (Finn et al. 2017), after the PyTorch port of Eric Jang's
# maml-jax in pytorch/functorch/examples/maml_regression/evjang.py.
# The network is a plain function of a list of leaf tensors; each task takes one SGD step
# on its support set and the meta-loss is measured on a fresh query set from the same task.

import math

import numpy as np
import torch
from torch.nn import functional as F

torch.manual_seed(0)
np.random.seed(0)


def net(x, params):
    x = F.linear(x, params[0], params[1])
    x = F.relu(x)

    x = F.linear(x, params[2], params[3])
    x = F.relu(x)

    x = F.linear(x, params[4], params[5])
    return x


params = [
    torch.Tensor(40, 1).uniform_(-1.0, 1.0).requires_grad_(),
    torch.Tensor(40).zero_().requires_grad_(),
    torch.Tensor(40, 40)
    .uniform_(-1.0 / math.sqrt(40), 1.0 / math.sqrt(40))
    .requires_grad_(),
    torch.Tensor(40).zero_().requires_grad_(),
    torch.Tensor(1, 40)
    .uniform_(-1.0 / math.sqrt(40), 1.0 / math.sqrt(40))
    .requires_grad_(),
    torch.Tensor(1).zero_().requires_grad_(),
]

opt = torch.optim.Adam(params, lr=1e-3)
alpha = 0.1

K = 20
losses = []
num_tasks = 4
num_iterations = 1200


def sample_tasks(outer_batch_size, inner_batch_size):
    # Select amplitude and phase for the task
    As = []
    phases = []
    for _ in range(outer_batch_size):
        As.append(np.random.uniform(low=0.1, high=0.5))
        phases.append(np.random.uniform(low=0.0, high=np.pi))

    def get_batch():
        xs, ys = [], []
        for A, phase in zip(As, phases):
            x = np.random.uniform(low=-5.0, high=5.0, size=(inner_batch_size, 1))
            y = A * np.sin(x + phase)
            xs.append(x)
            ys.append(y)
        return torch.tensor(np.array(xs), dtype=torch.float), torch.tensor(np.array(ys), dtype=torch.float)

    x1, y1 = get_batch()
    x2, y2 = get_batch()
    return x1, y1, x2, y2


def evaluate(n_tasks=64, steps=5):
    """Mean query MSE on fresh tasks before and after `steps` inner SGD steps."""
    x1, y1, x2, y2 = sample_tasks(n_tasks, K)
    before, after = 0.0, 0.0
    for i in range(n_tasks):
        t_params = params
        with torch.no_grad():
            before += F.mse_loss(net(x2[i], t_params), y2[i]).item()
        for _ in range(steps):
            t_loss = F.mse_loss(net(x1[i], t_params), y1[i])
            grads = torch.autograd.grad(t_loss, t_params)
            t_params = [(t_params[j] - alpha * grads[j]) for j in range(len(params))]
        with torch.no_grad():
            after += F.mse_loss(net(x2[i], t_params), y2[i]).item()
    return before / n_tasks, after / n_tasks


b, a = evaluate()
print("before meta-training -- query MSE: %.4f unadapted, %.4f after 5 inner steps" % (b, a))

for it in range(num_iterations):
    loss2 = 0.0
    opt.zero_grad()

    def get_loss_for_task(x1, y1, x2, y2):
        f = net(x1, params)
        loss = F.mse_loss(f, y1)

        grads = torch.autograd.grad(loss, params, create_graph=True)
        new_params = [(params[i] - alpha * grads[i]) for i in range(len(params))]

        v_f = net(x2, new_params)
        return F.mse_loss(v_f, y2)

    task = sample_tasks(num_tasks, K)
    inner_losses = [
        get_loss_for_task(task[0][i], task[1][i], task[2][i], task[3][i])
        for i in range(num_tasks)
    ]
    loss2 = sum(inner_losses) / len(inner_losses)
    loss2.backward()

    opt.step()

    losses.append(loss2.detach())
    if it % 100 == 0 or it == num_iterations - 1:
        avg = torch.stack(losses[-100:]).mean().item()
        print("Iteration %d -- Outer Loss: %.4f (avg last 100: %.4f)" % (it, loss2, avg))

b, a = evaluate()
print("after meta-training  -- query MSE: %.4f unadapted, %.4f after 5 inner steps" % (b, a))
