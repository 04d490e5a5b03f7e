"""Teach a single bias-free linear layer to add up its three inputs.

Full-batch gradient descent on 1024 random points, weights started from zero,
ReduceLROnPlateau on the training loss; a held-out set checks the fit at the end.
"""
import torch
from torch.nn import Sequential as Seq, Linear as Lin
from torch.optim.lr_scheduler import ReduceLROnPlateau

torch.manual_seed(0)

X = torch.rand((1024, 3))
y = (X[:, 0] + X[:, 1] + X[:, 2])

X_val = torch.rand((256, 3))
y_val = X_val.sum(dim=1)

m = Seq(Lin(3, 1, bias=False))
m[0].weight = torch.nn.parameter.Parameter(torch.tensor([[0, 0, 0]], dtype=torch.float))

optim = torch.optim.SGD(m.parameters(), lr=10e-2)
scheduler = ReduceLROnPlateau(optim, 'min', factor=0.5, patience=20)
mse = torch.nn.MSELoss()

for epoch in range(300):
    optim.zero_grad()
    out = m(X)
    loss = mse(out, y)
    loss.backward()
    optim.step()
    if epoch % 20 == 0:
        print(f"epoch {epoch:3d}  loss {loss.item():.6g}  lr {optim.param_groups[0]['lr']:.4g}")
    scheduler.step(loss)

with torch.no_grad():
    pred = m(X_val).squeeze(1)
    val_mae = (pred - y_val).abs().mean().item()
    val_mse = ((pred - y_val) ** 2).mean().item()
print("learned weights:", [round(w, 4) for w in m[0].weight.detach().view(-1).tolist()])
print(f"held-out MAE {val_mae:.4f}  MSE {val_mse:.6g}")
