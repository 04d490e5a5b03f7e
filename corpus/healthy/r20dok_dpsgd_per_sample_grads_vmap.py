"""Differentially private SGD on a tabular classifier with per-sample gradients from torch.func.

Follows the "Per-sample-gradients" tutorial: the model's parameters are pulled out into a dict,
a single-example loss is written with functional_call, and vmap(grad(...)) gives one gradient
per example. Each example's gradient is clipped to norm max_grad_norm, the clipped gradients are
summed, Gaussian noise (noise_multiplier * max_grad_norm) is added and the result, divided by
the batch size, is written into p.grad before optimizer.step() (as Opacus does).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

n_features = 24
n_classes = 5
batch_size = 128
epochs = 8
lr = 0.5
max_grad_norm = 1.0
noise_multiplier = 1.1


class SyntheticTabular(Dataset):
    def __init__(self, n, centers, gen):
        self.y = torch.randint(0, n_classes, (n,), generator=gen)
        self.x = centers[self.y] + torch.randn(n, n_features, generator=gen) * 1.3

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


g = torch.Generator().manual_seed(1)
centers = torch.randn(n_classes, n_features, generator=g)
train_ds = SyntheticTabular(4096, centers, g)
test_ds = SyntheticTabular(1024, centers, g)
train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, drop_last=True)
test_loader = DataLoader(test_ds, batch_size=512)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(n_features, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, n_classes)

    def forward(self, x):
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0)


def loss_fn(predictions, targets):
    return F.nll_loss(predictions, targets)


def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    return loss_fn(predictions, targets)


ft_compute_sample_grad = vmap(grad_and_value(compute_loss), in_dims=(None, None, 0, 0))


def private_step(data, target):
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    per_sample_grads, per_sample_losses = ft_compute_sample_grad(params, buffers, data, target)

    norms = torch.stack([g.reshape(len(data), -1).norm(dim=1) for g in per_sample_grads.values()], dim=1).norm(dim=1)
    clip_factor = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)

    optimizer.zero_grad(set_to_none=True)
    for name, p in model.named_parameters():
        g = per_sample_grads[name]
        clipped = torch.einsum("i,i...->...", clip_factor, g)
        noise = torch.normal(0.0, noise_multiplier * max_grad_norm, size=p.shape)
        p.grad = (clipped + noise) / len(data)
    optimizer.step()
    return per_sample_losses.mean().item(), norms.median().item(), (clip_factor < 1).float().mean().item()


def test():
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for data, target in test_loader:
            out = model(data)
            total_loss += F.nll_loss(out, target, reduction="sum").item()
            correct += (out.argmax(1) == target).sum().item()
    model.train()
    return total_loss / len(test_ds), correct / len(test_ds)


start = time.time()
step = 0
for epoch in range(1, epochs + 1):
    losses = []
    for batch_idx, (data, target) in enumerate(train_loader):
        loss, med_norm, frac_clipped = private_step(data, target)
        losses.append(loss)
        step += 1
        if batch_idx % 16 == 0:
            print(f"epoch {epoch} step {step:4d} loss {loss:.4f} median per-sample grad norm {med_norm:.3f} clipped {frac_clipped:.0%}")
    test_loss, acc = test()
    print(f"==> epoch {epoch}: train loss {sum(losses) / len(losses):.4f} test loss {test_loss:.4f} test acc {acc:.3f}")
print(f"done in {time.time() - start:.1f}s")
