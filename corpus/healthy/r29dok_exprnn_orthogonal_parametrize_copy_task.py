"""Copying task with an orthogonal RNN (expRNN style), using torch's built-in
orthogonal parametrization (matrix_exp map with dynamic trivialization) for the
recurrent kernel, a modReLU nonlinearity, Henaff init and a separate, smaller
learning rate for the orthogonal parameters.
"""
import math
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal

torch.manual_seed(5544)
np.random.seed(5544)

batch_size = 64
hidden_size = 64
iterations = 200
L = 12
K = 5
lr = 2e-3
lr_orth = 2e-4


def copying_data(L, K, batch_size):
    seq = np.random.randint(1, high=9, size=(batch_size, K))
    zeros1 = np.zeros((batch_size, L))
    zeros2 = np.zeros((batch_size, K - 1))
    zeros3 = np.zeros((batch_size, K + L))
    marker = 9 * np.ones((batch_size, 1))
    x = torch.LongTensor(np.concatenate((seq, zeros1, marker, zeros2), axis=1))
    y = torch.LongTensor(np.concatenate((zeros3, seq), axis=1))
    return x, y


def henaff_init_(A):
    size = A.size(0) // 2
    diag = A.new(size).uniform_(-math.pi, math.pi)
    with torch.no_grad():
        A.zero_()
        for i in range(size):
            A[2 * i, 2 * i + 1] = diag[i]
            A[2 * i + 1, 2 * i] = -diag[i]
    return A


class modrelu(nn.Module):
    def __init__(self, features):
        super(modrelu, self).__init__()
        self.features = features
        self.b = nn.Parameter(torch.Tensor(self.features))
        self.reset_parameters()

    def reset_parameters(self):
        self.b.data.uniform_(-0.01, 0.01)

    def forward(self, inputs):
        norm = torch.abs(inputs)
        biased_norm = norm + self.b
        magnitude = nn.functional.relu(biased_norm)
        phase = torch.sign(inputs)
        return phase * magnitude


class OrthogonalRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(OrthogonalRNN, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.recurrent_kernel = orthogonal(nn.Linear(hidden_size, hidden_size, bias=False),
                                           orthogonal_map="matrix_exp")
        self.input_kernel = nn.Linear(in_features=self.input_size, out_features=self.hidden_size, bias=False)
        self.nonlinearity = modrelu(hidden_size)
        nn.init.kaiming_normal_(self.input_kernel.weight.data, nonlinearity="relu")
        with torch.no_grad():
            A = henaff_init_(torch.empty(hidden_size, hidden_size))
            self.recurrent_kernel.weight = torch.matrix_exp(A)

    def default_hidden(self, input):
        return input.new_zeros(input.size(0), self.hidden_size, requires_grad=False)

    def forward(self, input, hidden):
        input = self.input_kernel(input)
        hidden = self.recurrent_kernel(hidden)
        out = input + hidden
        out = self.nonlinearity(out)
        return out, out


class Model(nn.Module):
    def __init__(self, n_classes, hidden_size):
        super(Model, self).__init__()
        self.hidden_size = hidden_size
        self.rnn = OrthogonalRNN(n_classes + 1, hidden_size)
        self.lin = nn.Linear(hidden_size, n_classes)
        self.loss_func = nn.CrossEntropyLoss()
        nn.init.kaiming_normal_(self.lin.weight.data, nonlinearity="relu")
        nn.init.constant_(self.lin.bias.data, 0)

    def forward(self, inputs):
        state = self.rnn.default_hidden(inputs[:, 0, ...])
        outputs = []
        with parametrize.cached():
            for input in torch.unbind(inputs, dim=1):
                out_rnn, state = self.rnn(input, state)
                outputs.append(self.lin(out_rnn))
        return torch.stack(outputs, dim=1)

    def loss(self, logits, y):
        return self.loss_func(logits.view(-1, 9), y.view(-1))

    def accuracy(self, logits, y):
        return torch.eq(torch.argmax(logits, dim=2), y).float().mean()


def get_parameters(model):
    orth, non_orth = [], []
    for name, p in model.named_parameters():
        (orth if "parametrizations" in name else non_orth).append(p)
    return non_orth, orth


def onehot(out, input):
    out.zero_()
    out.scatter_(2, torch.unsqueeze(input, 2), 1)


n_classes = 9
n_characters = n_classes + 1
n_len = L + 2 * K
train_x, train_y = copying_data(L, K, iterations * batch_size)

model = Model(n_classes, hidden_size)
model.train()
non_orth_params, orth_params = get_parameters(model)
optim = torch.optim.RMSprop(non_orth_params, lr)
optim_orth = torch.optim.RMSprop(orth_params, lr=lr_orth)
print("memoryless baseline loss: {:.4f}".format(K * math.log(8) / (L + 2 * K)))

x_onehot = torch.FloatTensor(batch_size, n_len, n_characters)
for step in range(iterations):
    batch_x = train_x[step * batch_size:(step + 1) * batch_size]
    onehot(x_onehot, batch_x)
    batch_y = train_y[step * batch_size:(step + 1) * batch_size]

    logits = model(x_onehot)
    loss = model.loss(logits, batch_y)

    optim.zero_grad()
    optim_orth.zero_grad()
    loss.backward()
    optim.step()
    optim_orth.step()

    if step % 20 == 0 or step == iterations - 1:
        with torch.no_grad():
            accuracy = model.accuracy(logits, batch_y)
            copy_acc = torch.eq(torch.argmax(logits[:, -K:], dim=2), batch_y[:, -K:]).float().mean()
        print("Iter {}: Loss= {:.6f}, Accuracy= {:.5f}, copy accuracy= {:.3f}".format(step, loss, accuracy, copy_acc))

model.eval()
with torch.no_grad():
    test_x, test_y = copying_data(L, K, batch_size)
    onehot(x_onehot, test_x)
    logits = model(x_onehot)
    loss = model.loss(logits, test_y)
    copy_acc = torch.eq(torch.argmax(logits[:, -K:], dim=2), test_y[:, -K:]).float().mean()
    print("Test result: Loss= {:.6f}, Accuracy= {:.5f}, copy accuracy= {:.3f}".format(loss, model.accuracy(logits, test_y), copy_acc))
