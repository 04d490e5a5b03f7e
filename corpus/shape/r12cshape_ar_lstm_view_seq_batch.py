"""LSTM baseline for autoregressive time-series prediction.

Generates AR(20) data (each input is the previous 20 values of the series, the target is the
next value), then fits a 2-layer LSTM that reads one timestep at a time and predicts the next
value from the output at the final timestep. The whole training set is one batch.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

#####################
# Set parameters
#####################

# Data params
noise_var = 0.5
num_datapoints = 800
test_size = 0.2
num_train = int((1 - test_size) * num_datapoints)

# Network params
input_size = 20
# If `per_element` is True, then LSTM reads in one timestep at a time.
per_element = True
if per_element:
    lstm_input_size = 1
else:
    lstm_input_size = input_size
# size of hidden layers
h1 = 32
output_dim = 1
num_layers = 2
learning_rate = 1e-2
num_epochs = 100
dtype = torch.float

fixed_ar_coefficients = {20: [0.1937815, 0.01201026, 0.00464018, -0.21887467, -0.20113385, -0.02322278,
                              0.34285319, -0.21069086, 0.06604683, -0.22377364, 0.11714593, -0.07122126,
                              -0.16346554, 0.03174824, 0.308584, 0.06881604, 0.24840789, -0.32735569,
                              0.21939492, 0.3996207]}


class ARData:
    """Autoregressive data: y[t] = sum_k coeffs[k] * y[t-1-k] + noise."""

    def __init__(self, num_datapoints, num_prev=1, test_size=0.2, noise_var=1.0, coeffs=None):
        self.num_datapoints = num_datapoints
        self.num_prev = num_prev
        self.test_size = test_size
        self.noise_var = noise_var
        self.coeffs = np.asarray(coeffs)
        self.y = np.zeros(num_datapoints + num_prev * 4)
        self.generate_data()
        self.reshape_data()
        self.train_test_split()

    def generate_data(self):
        self.y[:self.num_prev] = np.random.randn(self.num_prev)
        for i in range(self.num_datapoints + 3 * self.num_prev):
            pred = np.dot(self.y[i:self.num_prev + i][::-1], self.coeffs)
            self.y[i + self.num_prev] = pred + self.noise_var * np.random.randn()
        self.y = self.y[3 * self.num_prev:]

    def reshape_data(self):
        self.x = np.reshape([self.y[i:i + self.num_prev] for i in range(self.num_datapoints)],
                            (-1, self.num_prev))
        self.y = np.copy(self.y[self.num_prev:])

    def train_test_split(self):
        test_size = int(len(self.y) * self.test_size)
        self.X_train, self.X_test = self.x[:-test_size], self.x[-test_size:]
        self.y_train, self.y_test = self.y[:-test_size], self.y[-test_size:]


#####################
# Generate data
#####################
data = ARData(num_datapoints, num_prev=input_size, test_size=test_size, noise_var=noise_var,
              coeffs=fixed_ar_coefficients[input_size])

# make training and test sets in torch
X_train = torch.from_numpy(data.X_train).type(torch.Tensor)
X_test = torch.from_numpy(data.X_test).type(torch.Tensor)
y_train = torch.from_numpy(data.y_train).type(torch.Tensor).view(-1)
y_test = torch.from_numpy(data.y_test).type(torch.Tensor).view(-1)

X_train = X_train.view([input_size, -1, 1])
X_test = X_test.view([input_size, -1, 1])

#####################
# Build model
#####################


class LSTM(nn.Module):

    def __init__(self, input_dim, hidden_dim, batch_size, output_dim=1, num_layers=2):
        super(LSTM, self).__init__()
        self.input_dim = input_dim
        self.hidden_dim = hidden_dim
        self.batch_size = batch_size
        self.num_layers = num_layers

        # Define the LSTM layer
        self.lstm = nn.LSTM(self.input_dim, self.hidden_dim, self.num_layers)

        # Define the output layer
        self.linear = nn.Linear(self.hidden_dim, output_dim)

    def init_hidden(self):
        return (torch.zeros(self.num_layers, self.batch_size, self.hidden_dim),
                torch.zeros(self.num_layers, self.batch_size, self.hidden_dim))

    def forward(self, input):
        # shape of lstm_out: [input_size, batch_size, hidden_dim]
        lstm_out, self.hidden = self.lstm(input.view(len(input), self.batch_size, -1))

        # Only take the output from the final timestep
        y_pred = self.linear(lstm_out[-1].view(self.batch_size, -1))
        return y_pred.view(-1)


model = LSTM(lstm_input_size, h1, batch_size=num_train, output_dim=output_dim, num_layers=num_layers)

loss_fn = torch.nn.MSELoss(reduction="sum")

optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)

#####################
# Train model
#####################

hist = np.zeros(num_epochs)
target_var = float(((y_train - y_train.mean()) ** 2).sum())
print(f"train target sum of squares around the mean: {target_var:.1f}")

for t in range(num_epochs):
    # Initialise hidden state
    model.hidden = model.init_hidden()

    # Forward pass
    y_pred = model(X_train)

    loss = loss_fn(y_pred, y_train)
    if t % 10 == 0:
        print("Epoch ", t, "MSE: ", loss.item())
    hist[t] = loss.item()

    # Zero out gradient, else they will accumulate between epochs
    optimiser.zero_grad()

    # Backward pass
    loss.backward()

    # Update parameters
    optimiser.step()

print("final train MSE (sum):", hist[-1], " per sample:", hist[-1] / num_train)

model.eval()
with torch.no_grad():
    model.batch_size = X_test.shape[1]
    model.hidden = model.init_hidden()
    test_pred = model(X_test)
    test_mse = ((test_pred - y_test) ** 2).mean().item()
print(f"test MSE per sample: {test_mse:.4f}  (target variance {y_test.var().item():.4f})")
