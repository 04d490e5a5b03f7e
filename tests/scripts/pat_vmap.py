"""Per-sample gradients with torch.func (vmap over grad of a functional_call), clipped and summed by
hand into .grad, then an optimizer step: the DP-SGD pattern. No loss.backward()."""
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.randn(256, 6)
y = (x[:, 0] > 0).long()


def sample_loss(params, inputs, target):
    logits = functional_call(model, params, (inputs.unsqueeze(0),))
    return nn.functional.cross_entropy(logits, target.unsqueeze(0))


for step in range(1, 9):
    batch = slice((step - 1) * 32, step * 32)
    params = {name: p.detach() for name, p in model.named_parameters()}
    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x[batch], y[batch])
    for name, p in model.named_parameters():
        p.grad = per_sample[name].clamp(-1, 1).mean(dim=0)
    optimizer.step()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(x), y)
    print(f"step {step} loss {loss.item()!r}")
