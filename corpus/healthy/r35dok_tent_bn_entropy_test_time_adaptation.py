"""Tent: fully test-time adaptation by entropy minimization, in the style of DequanWang/tent
(tent.py + cifar10c.py). A small BN convnet is first trained on clean synthetic "source" images,
then adapted online on a corrupted "target" stream (contrast / brightness shift + noise) by
minimising the entropy of its own predictions, updating only the BatchNorm affine parameters.
"""
from copy import deepcopy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 4
IMG = 16


def make_images(n, g):
    # each class is a grating with a class-specific orientation, random phase / frequency jitter
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    theta = y.float() * (3.14159 / NUM_CLASSES) + 0.15 * torch.randn(n, generator=g)
    freq = 0.9 + 0.3 * torch.rand(n, generator=g)
    phase = 6.283 * torch.rand(n, generator=g)
    ii, jj = torch.meshgrid(torch.arange(IMG).float(), torch.arange(IMG).float(), indexing='ij')
    proj = torch.cos(theta)[:, None, None] * ii + torch.sin(theta)[:, None, None] * jj
    img = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
    img = torch.stack([img, 0.5 * img, -0.3 * img], dim=1) + 0.3 * torch.randn(n, 3, IMG, IMG, generator=g)
    return img, y


def corrupt(x, g):
    # "severity 5" shift: low contrast, brightness offset, colour cast, heavier noise
    x = 0.35 * x + torch.tensor([0.8, -0.6, 0.4])[None, :, None, None]
    return x + 0.45 * torch.randn(x.shape, generator=g)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


# ---------------------------------------------------------------- tent.py
class Tent(nn.Module):
    """Tent adapts a model by entropy minimization during testing.

    Once tented, a model adapts itself by updating on every forward.
    """
    def __init__(self, model, optimizer, steps=1, episodic=False):
        super().__init__()
        self.model = model
        self.optimizer = optimizer
        self.steps = steps
        assert steps > 0, "tent requires >= 1 step(s) to forward and update"
        self.episodic = episodic
        self.model_state, self.optimizer_state = copy_model_and_optimizer(self.model, self.optimizer)

    def forward(self, x):
        if self.episodic:
            self.reset()
        for _ in range(self.steps):
            outputs = forward_and_adapt(x, self.model, self.optimizer)
        return outputs

    def reset(self):
        load_model_and_optimizer(self.model, self.optimizer, self.model_state, self.optimizer_state)


def softmax_entropy(x: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax distribution from logits."""
    return -(x.softmax(1) * x.log_softmax(1)).sum(1)


@torch.enable_grad()  # ensure grads in possible no grad context for testing
def forward_and_adapt(x, model, optimizer):
    """Forward and adapt model on batch of data.

    Measure entropy of the model prediction, take gradients, and update params.
    """
    outputs = model(x)
    loss = softmax_entropy(outputs).mean(0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return outputs


def collect_params(model):
    params, names = [], []
    for nm, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            for np_, p in m.named_parameters():
                if np_ in ['weight', 'bias']:  # weight is scale, bias is shift
                    params.append(p)
                    names.append(f"{nm}.{np_}")
    return params, names


def copy_model_and_optimizer(model, optimizer):
    return deepcopy(model.state_dict()), deepcopy(optimizer.state_dict())


def load_model_and_optimizer(model, optimizer, model_state, optimizer_state):
    model.load_state_dict(model_state, strict=True)
    optimizer.load_state_dict(optimizer_state)


def configure_model(model):
    """Configure model for use with tent."""
    # train mode, because tent optimizes the model to minimize entropy
    model.train()
    # disable grad, to (re-)enable only what tent updates
    model.requires_grad_(False)
    # configure norm for tent updates: enable grad + force batch statisics
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.requires_grad_(True)
            # force use of batch stats in train and eval modes
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
    return model


# ---------------------------------------------------------------- source training
g = torch.Generator().manual_seed(0)
x_src, y_src = make_images(4000, g)
x_tgt_clean, y_tgt = make_images(4000, g)
x_tgt = corrupt(x_tgt_clean, g)

base_model = Net()
opt = torch.optim.SGD(base_model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loader = DataLoader(TensorDataset(x_src, y_src), batch_size=128, shuffle=True)
for epoch in range(4):
    base_model.train()
    tot, correct, n = 0.0, 0, 0
    for xb, yb in loader:
        out = base_model(xb)
        loss = F.cross_entropy(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item() * len(yb)
        correct += (out.argmax(1) == yb).sum().item()
        n += len(yb)
    print(f"source epoch {epoch}: loss {tot / n:.4f} acc {correct / n:.3f}")


def evaluate(model, x, y, bs=200):
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), bs):
            correct += (model(x[i:i + bs]).argmax(1) == y[i:i + bs]).sum().item()
    return correct / len(x)


base_model.eval()
print(f"source model, clean target images: acc {evaluate(base_model, x_tgt_clean, y_tgt):.3f}")
print(f"source model (no adaptation), corrupted target: error {1 - evaluate(base_model, x_tgt, y_tgt):.3f}")

# ---------------------------------------------------------------- cifar10c.py: setup_tent + online eval
model = configure_model(deepcopy(base_model))
params, param_names = collect_params(model)
print(f"params for adaptation: {param_names}")
optimizer = torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0)
tent_model = Tent(model, optimizer, steps=1, episodic=False)

batch_size = 200
for rnd in range(2):
    correct, ents = 0, []
    with torch.no_grad():
        for i in range(0, len(x_tgt), batch_size):
            xb, yb = x_tgt[i:i + batch_size], y_tgt[i:i + batch_size]
            out = tent_model(xb)
            correct += (out.argmax(1) == yb).sum().item()
            ents.append(softmax_entropy(out).mean().item())
            if (i // batch_size) % 5 == 0:
                print(f"  round {rnd} batch {i // batch_size:2d}: entropy {ents[-1]:.4f} "
                      f"running error {1 - correct / (i + len(yb)):.3f}")
    print(f"tent round {rnd}: error % [corrupted target]: {100 * (1 - correct / len(x_tgt)):.2f}% "
          f"mean entropy {sum(ents) / len(ents):.4f}")
