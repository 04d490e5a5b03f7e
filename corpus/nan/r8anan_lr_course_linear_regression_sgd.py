"""Linear regression with PyTorch (course exercise): fit a line to noisy points with
nn.Linear, MSELoss and plain SGD, printing the loss every epoch.
"""
import torch
import torch.nn as nn

torch.manual_seed(75)

X = torch.randn(100, 1) * 10
y = X + 3 * torch.randn(100, 1)


class LR(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)

    def forward(self, x):
        pred = self.linear(x)
        return pred


def get_params(model):
    [w, b] = model.parameters()
    return w[0][0].item(), b[0].item()


torch.manual_seed(1)
model = LR(1, 1)
print("initial parameters: w=%.4f b=%.4f" % get_params(model))

criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

epochs = 150
losses = []
for i in range(epochs):
    y_pred = model.forward(X)
    loss = criterion(y_pred, y)
    print("epoch:", i, "loss:", loss.item())
    losses.append(loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print("final parameters: w=%.4f b=%.4f" % get_params(model))
