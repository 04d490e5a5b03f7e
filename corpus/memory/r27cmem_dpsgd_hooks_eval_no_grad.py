"""Differentially private training (DP-SGD) of an activity classifier on sensor features.

Per-sample gradients come from module hooks (Opacus GradSampleModule style): a forward
hook records the layer input, a backward hook turns it into per-sample gradients.
The optimizer clips every per-sample gradient, adds Gaussian noise and averages.
The validation accuracy is checked every few steps.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_FEATURES = 256
N_CLASSES = 8


class GradSampleModule(nn.Module):
    def __init__(self, module):
        super().__init__()
        self._module = module
        self.layers = [m for m in module.modules() if isinstance(m, nn.Linear)]
        for layer in self.layers:
            layer.activations = []
            layer.register_forward_hook(self.capture_activations_hook)
            layer.register_full_backward_hook(self.capture_backprops_hook)

    @staticmethod
    def capture_activations_hook(module, forward_input, forward_output):
        if not module.training:
            return
        module.activations.append(forward_input[0].detach())

    @staticmethod
    def capture_backprops_hook(module, grad_input, grad_output):
        activations = module.activations.pop()
        backprops = grad_output[0].detach() * activations.shape[0]
        module.weight.grad_sample = torch.einsum("ni,nj->nij", backprops, activations)
        module.bias.grad_sample = backprops

    def forward(self, x):
        return self._module(x)


class DPOptimizer:
    def __init__(self, optimizer, params, noise_multiplier, max_grad_norm, batch_size):
        self.optimizer = optimizer
        self.params = params
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size

    def zero_grad(self):
        self.optimizer.zero_grad()
        for p in self.params:
            p.grad_sample = None

    def step(self):
        per_sample_norms = torch.stack(
            [p.grad_sample.flatten(1).norm(dim=1) for p in self.params], dim=1).norm(dim=1)
        factor = (self.max_grad_norm / (per_sample_norms + 1e-6)).clamp(max=1.0)
        for p in self.params:
            clipped = torch.einsum("n,n...->...", factor, p.grad_sample)
            noise = torch.randn_like(clipped) * self.noise_multiplier * self.max_grad_norm
            p.grad = (clipped + noise) / self.batch_size
        self.optimizer.step()


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(42)) * 0.4
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    x = centers[y] + torch.randn(n, N_FEATURES, generator=g)
    return TensorDataset(x, y)


train_loader = DataLoader(make_split(8192, 1), batch_size=64, shuffle=True, drop_last=True)
val_loader = DataLoader(make_split(16384, 2), batch_size=1024)

net = nn.Sequential(
    nn.Linear(N_FEATURES, 256), nn.ReLU(),
    nn.Linear(256, 256), nn.ReLU(),
    nn.Linear(256, N_CLASSES),
)
model = GradSampleModule(net)
params = [p for layer in model.layers for p in (layer.weight, layer.bias)]
optimizer = DPOptimizer(torch.optim.SGD(params, lr=0.5), params,
                        noise_multiplier=0.8, max_grad_norm=1.0, batch_size=64)


def evaluate():
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(val_loader.dataset)


step = 0
for epoch in range(2):
    for x, y in train_loader:
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if step % 20 == 0:
            acc = evaluate()
            print(f"epoch {epoch + 1} step {step}: loss {loss.item():.4f}  val acc {acc:.3f}")
