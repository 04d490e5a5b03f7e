"""Deep equilibrium (DEQ) classifier, following the implicit-layers tutorial (chapter 4, Deep
Equilibrium Models): the equilibrium z* = f(z*, x) of a weight-tied residual cell is found by
forward iteration under no_grad, f is applied once more with autograd on, and a backward hook on
z solves the adjoint fixed point g = J_f(z*)^T g + grad (implicit differentiation) instead of
backpropagating through the solver iterations. Synthetic 5-class data from a random teacher net."""
import torch
import torch.nn as nn
import torch.autograd as autograd
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


def forward_iteration(f, x0, max_iter=30, tol=1e-2):
    f0 = f(x0)
    res = []
    for k in range(max_iter):
        x = f0
        f0 = f(x)
        res.append((f0 - x).norm().item() / (1e-5 + f0.norm().item()))
        if res[-1] < tol:
            break
    return f0, res


class ResNetLayer(nn.Module):
    def __init__(self, n_channels, n_inner_channels, num_groups=8):
        super().__init__()
        self.lin1 = nn.Linear(n_channels, n_inner_channels, bias=False)
        self.lin2 = nn.Linear(n_inner_channels, n_channels, bias=False)
        self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
        self.norm2 = nn.GroupNorm(num_groups, n_channels)
        self.norm3 = nn.GroupNorm(num_groups, n_channels)
        self.lin1.weight.data.normal_(0, 0.01)
        self.lin2.weight.data.normal_(0, 0.01)

    def forward(self, z, x):
        y = self.norm1(torch.relu(self.lin1(z)))
        return self.norm3(torch.relu(z + self.norm2(x + self.lin2(y))))


class DEQFixedPoint(nn.Module):
    def __init__(self, f, solver, **kwargs):
        super().__init__()
        self.f = f
        self.solver = solver
        self.kwargs = kwargs

    def forward(self, x):
        # compute forward pass and re-engage autograd tape
        with torch.no_grad():
            z, self.forward_res = self.solver(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
        z = self.f(z, x)

        # set up Jacobian vector product (without additional forward calls)
        z0 = z.clone().detach().requires_grad_()
        f0 = self.f(z0, x)

        def backward_hook(grad):
            g, self.backward_res = self.solver(
                lambda y: autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad, **self.kwargs)
            return g

        if z.requires_grad:
            z.register_hook(backward_hook)
        return z


n_features, n_classes, hidden = 10, 5, 64
teacher = nn.Sequential(nn.Linear(n_features, 32), nn.Tanh(), nn.Linear(32, n_classes))
with torch.no_grad():
    X = torch.randn(1600, n_features)
    Y = teacher(X).argmax(dim=1)
train_ds = TensorDataset(X[:1200], Y[:1200])
test_ds = TensorDataset(X[1200:], Y[1200:])
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
test_loader = DataLoader(test_ds, batch_size=400, shuffle=False)

f = ResNetLayer(hidden, 128, num_groups=8)
model = nn.Sequential(
    nn.Linear(n_features, hidden),
    nn.BatchNorm1d(hidden),
    DEQFixedPoint(f, forward_iteration, tol=1e-2, max_iter=30),
    nn.BatchNorm1d(hidden),
    nn.Linear(hidden, n_classes),
)
deq = model[2]

max_epochs = 8
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max_epochs * len(train_loader), eta_min=1e-6)
criterion = nn.CrossEntropyLoss()


def evaluate():
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for xb, yb in test_loader:
            out = model(xb)
            loss_sum += criterion(out, yb).item() * xb.size(0)
            correct += (out.argmax(1) == yb).sum().item()
    return correct / len(test_ds), loss_sum / len(test_ds)


acc, tl = evaluate()
print(f"init | test loss {tl:.3f} | test acc {acc:.3f}")
for epoch in range(max_epochs):
    model.train()
    total_loss, total_err, fwd_iters, bwd_iters = 0.0, 0.0, 0, 0
    for xb, yb in train_loader:
        yp = model(xb)
        loss = criterion(yp, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()
        total_err += (yp.argmax(dim=1) != yb).sum().item()
        total_loss += loss.item() * xb.shape[0]
        fwd_iters += len(deq.forward_res)
        bwd_iters += len(deq.backward_res)
    n = len(train_ds)
    acc, tl = evaluate()
    print(f"epoch {epoch + 1} | train loss {total_loss / n:.3f} | train err {total_err / n:.3f} | "
          f"fwd iters {fwd_iters / len(train_loader):.1f} (res {deq.forward_res[-1]:.1e}) | "
          f"bwd iters {bwd_iters / len(train_loader):.1f} (res {deq.backward_res[-1]:.1e}) | "
          f"test loss {tl:.3f} | test acc {acc:.3f}")
