"""Linear regression from scratch with autograd: y = 2x + 5 plus noise, plain gradient descent."""
import torch

torch.manual_seed(10)

lr = 0.05

x = torch.rand(20, 1) * 10
y = 2 * x + (5 + torch.randn(20, 1))

w = torch.randn((1), requires_grad=True)
b = torch.zeros((1), requires_grad=True)

for iteration in range(200):
    wx = torch.mul(w, x)
    y_pred = torch.add(wx, b)

    loss = (0.5 * (y - y_pred) ** 2).mean()

    loss.backward()

    b.data.sub_(lr * b.grad)
    w.data.sub_(lr * w.grad)

    if iteration % 20 == 0:
        print(f"iteration {iteration:3d}  loss {loss.item():.4f}  w {w.item():.3f}  b {b.item():.3f}")

print(f"final loss {loss.item():.4f}  w {w.item():.3f}  b {b.item():.3f}")
