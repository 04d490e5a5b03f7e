"""Parallel training of an ensemble of small MLPs with torch.func, after
functorch/examples/ensembling/parallel_train.py (itself a port of Will Whitney's JAX tutorial).

The weights of all ensemble members live in one stacked dict (stack_module_state); one
train step computes grads with grad_and_value and applies plain SGD by hand, and vmap runs it
over the ensemble dimension. Each member sees its own random subset of the spirals each step.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, stack_module_state, vmap

torch.manual_seed(0)
DEVICE = "cpu"
NUM_MODELS = 5
BATCH = 64


def make_spirals(n_samples, noise_std=0., rotations=1.):
    ts = torch.linspace(0, 1, n_samples, device=DEVICE)
    rs = ts ** 0.5
    thetas = rs * rotations * 2 * math.pi
    signs = torch.randint(0, 2, (n_samples,), device=DEVICE) * 2 - 1
    labels = (signs > 0).to(torch.long).to(DEVICE)

    xs = rs * signs * torch.cos(thetas) + torch.randn(n_samples, device=DEVICE) * noise_std
    ys = rs * signs * torch.sin(thetas) + torch.randn(n_samples, device=DEVICE) * noise_std
    points = torch.stack([xs, ys], dim=1)
    return points, labels


points, labels = make_spirals(400, noise_std=0.05)
test_points, test_labels = make_spirals(400, noise_std=0.05)


class MLPClassifier(nn.Module):
    def __init__(self, hidden_dim=32, n_classes=2):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.n_classes = n_classes

        self.fc1 = nn.Linear(2, self.hidden_dim)
        self.fc2 = nn.Linear(self.hidden_dim, self.n_classes)

    def forward(self, x):
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        x = F.log_softmax(x, -1)
        return x


loss_fn = nn.NLLLoss()
model = MLPClassifier().to(DEVICE)


def train_step_fn(weights, batch, targets, lr=0.2):
    def compute_loss(weights, batch, targets):
        output = functional_call(model, weights, batch)
        loss = loss_fn(output, targets)
        return loss

    grad_weights, loss = grad_and_value(compute_loss)(weights, batch, targets)

    new_weights = {}
    with torch.no_grad():
        for key in grad_weights:
            new_weights[key] = weights[key] - grad_weights[key] * lr

    return loss, new_weights


def init_fn(num_models):
    models = [MLPClassifier().to(DEVICE) for _ in range(num_models)]
    params, _ = stack_module_state(models)
    return params


def predict(weights, x):
    return functional_call(model, weights, x)


def evaluate(batched_weights):
    logp = vmap(predict, in_dims=(0, None))(batched_weights, test_points)
    member_acc = (logp.argmax(-1) == test_labels).float().mean(1)
    ens = logp.exp().mean(0).argmax(-1)
    ens_acc = (ens == test_labels).float().mean().item()
    return member_acc, ens_acc


parallel_train_step_fn = vmap(train_step_fn, in_dims=(0, 0, 0))
batched_weights = init_fn(num_models=NUM_MODELS)

member_acc, ens_acc = evaluate(batched_weights)
print(f"init: member acc {[round(a, 3) for a in member_acc.tolist()]}  ensemble acc {ens_acc:.3f}")

for i in range(1500):
    idx = torch.randint(0, points.shape[0], (NUM_MODELS, BATCH))
    loss, batched_weights = parallel_train_step_fn(batched_weights, points[idx], labels[idx])
    if i % 250 == 0 or i == 1499:
        member_acc, ens_acc = evaluate(batched_weights)
        print(f"step {i:4d}  loss {[round(l, 3) for l in loss.tolist()]}  "
              f"test acc {[round(a, 3) for a in member_acc.tolist()]}  ensemble {ens_acc:.3f}")
