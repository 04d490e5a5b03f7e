"""A single fully connected layer that learns a fixed linear map from 4 inputs to 2 outputs.

Same recipe as the "simple layer" examples of analog training toolkits, written with
a plain nn.Linear, a DataLoader of random inputs and SGD.
"""
import torch
from torch.nn import Linear
from torch.nn.functional import mse_loss
from torch.optim import SGD
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)

# Prepare the datasets (input and expected output).
W_true = torch.tensor([[1.0, 0.5], [0.7, 0.3], [0.2, 0.9], [0.4, 0.6]])
x_all = torch.rand(2048, 4)
y_all = x_all @ W_true
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=64, shuffle=True)

# Define a single-layer network.
model = Linear(4, 2)

# Define the optimizer.
opt = SGD(model.parameters(), lr=0.1)

step = 0
for epoch in range(7):
    epoch_loss = 0.0
    for x_b, y_b in loader:
        # Add the training Tensor to the model (input).
        pred = model(x_b)
        # Add the expected output Tensor.
        loss = mse_loss(pred, y_b)
        # Run training (backward propagation).
        loss.backward()

        opt.step()

        epoch_loss += loss.item()
        step += 1
        if step % 10 == 0:
            print("Step {}: Loss error: {:.6f}".format(step, loss.item()))

    print("Epoch {}: mean loss {:.6f}".format(epoch, epoch_loss / len(loader)))
