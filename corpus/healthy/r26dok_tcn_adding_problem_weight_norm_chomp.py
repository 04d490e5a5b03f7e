"""Temporal Convolutional Network on the adding problem, after locuslab/TCN (tcn.py + adding_problem/
add_test.py): dilated causal Conv1d blocks wrapped in weight_norm, padding (k-1)*d on both sides
and a Chomp1d that cuts the right-hand padding off again, residual 1x1 downsample, and a Linear head
on the last time step. Each sequence has two channels: random values in [0, 1] and a marker channel
with two ones; the target is the sum of the two marked values (predicting 1.0 always gives MSE ~0.167)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm

torch.manual_seed(1111)

SEQ_LEN = 30
N_TRAIN = 3200
N_TEST = 500
BATCH_SIZE = 16
EPOCHS = 4
LR = 2e-3
CLIP = -1


def data_generator(N, seq_length):
    X_num = torch.rand([N, 1, seq_length])
    X_mask = torch.zeros([N, 1, seq_length])
    Y = torch.zeros([N, 1])
    for i in range(N):
        positions = torch.randperm(seq_length)[:2]
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i, 0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = torch.cat((X_num, X_mask), dim=1)
    return X, Y


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.0):
        super(TemporalBlock, self).__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.0):
        super(TemporalConvNet, self).__init__()
        layers = []
        for i in range(len(num_channels)):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i - 1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size - 1) * dilation_size, dropout=dropout)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(TCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


X_train, Y_train = data_generator(N_TRAIN, SEQ_LEN)
X_test, Y_test = data_generator(N_TEST, SEQ_LEN)

model = TCN(2, 1, [24] * 4, kernel_size=4, dropout=0.0)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(X_test)
        test_loss = F.mse_loss(output, Y_test)
    print('Test set: Average loss: {:.6f}'.format(test_loss.item()))
    return test_loss.item()


def train(epoch):
    model.train()
    batch_idx = 1
    total_loss = 0
    for i in range(0, X_train.size(0), BATCH_SIZE):
        x = X_train[i:i + BATCH_SIZE]
        y = Y_train[i:i + BATCH_SIZE]
        optimizer.zero_grad()
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        if CLIP > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        batch_idx += 1
        total_loss += loss.item()
        if batch_idx % 50 == 0:
            cur_loss = total_loss / 50
            print('Train Epoch: {:2d} [{:6d}/{:6d}]\tLearning rate: {:.4f}\tLoss: {:.6f}'.format(
                epoch, i, X_train.size(0), LR, cur_loss))
            total_loss = 0


evaluate()
for ep in range(1, EPOCHS + 1):
    train(ep)
    evaluate()
