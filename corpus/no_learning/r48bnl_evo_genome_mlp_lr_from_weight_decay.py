"""Evolve-and-train: build an MLP from a genome (layers, dropout, activation,
optimizer, lr, weight decay) and train it on 28x28 digit-like images."""
import random

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


class Flatten(nn.Module):
    """A simple flatten module."""

    def forward(self, x):
        return x.view(x.size(0), -1)


def make_digits(n, protos, noise=1.0):
    labels = torch.randint(0, 10, (n,))
    imgs = protos[labels] + noise * torch.randn(n, 1, 28, 28)
    return imgs, labels


class CustomModel():

    def __init__(self, build_info):
        previous_units = 28 * 28
        self.model = nn.Sequential()
        self.model.add_module('flatten', Flatten())
        for i, layer_info in enumerate(build_info['layers']):
            i = str(i)
            self.model.add_module('fc_' + i, nn.Linear(previous_units, layer_info['nb_units']['val']))
            self.model.add_module('dropout_' + i, nn.Dropout(p=layer_info['dropout_rate']['val']))
            if layer_info['activation']['val'] == 'tanh':
                self.model.add_module('tanh_' + i, nn.Tanh())
            if layer_info['activation']['val'] == 'relu':
                self.model.add_module('relu_' + i, nn.ReLU())
            if layer_info['activation']['val'] == 'sigmoid':
                self.model.add_module('sigm_' + i, nn.Sigmoid())
            if layer_info['activation']['val'] == 'elu':
                self.model.add_module('elu_' + i, nn.ELU())
            previous_units = layer_info['nb_units']['val']
        self.model.add_module('classification_layer', nn.Linear(previous_units, 10))
        self.model.add_module('sofmax', nn.LogSoftmax(dim=1))

        if build_info['optimizer']['val'] == 'adam':
            optimizer = optim.Adam(self.model.parameters(),
                                   lr=build_info['weight_decay']['val'],
                                   weight_decay=build_info['weight_decay']['val'])
        elif build_info['optimizer']['val'] == 'adadelta':
            optimizer = optim.Adadelta(self.model.parameters(),
                                       lr=build_info['weight_decay']['val'],
                                       weight_decay=build_info['weight_decay']['val'])
        elif build_info['optimizer']['val'] == 'rmsprop':
            optimizer = optim.RMSprop(self.model.parameters(),
                                      lr=build_info['weight_decay']['val'],
                                      weight_decay=build_info['weight_decay']['val'])
        else:
            optimizer = optim.SGD(self.model.parameters(),
                                  lr=build_info['weight_decay']['val'],
                                  weight_decay=build_info['weight_decay']['val'],
                                  momentum=0.9)
        self.optimizer = optimizer

    def train(self, train_loader, max_batches=100):
        """Train for 1 epoch."""
        self.model.train()
        batch = 0
        total = 0.0
        for batch_idx, (data, target) in enumerate(train_loader):
            self.optimizer.zero_grad()
            output = self.model(data)
            loss = F.nll_loss(output, target)
            np_loss = loss.item()
            if np.isnan(np_loss):
                print('stopping training - nan loss')
                return -1
            elif np_loss > 100000:
                print('Qutting, loss too high', np_loss)
                return -1
            loss.backward()
            self.optimizer.step()
            total += np_loss
            batch += 1
            if batch >= max_batches:
                break
        return total / batch

    def test(self, test_loader):
        """Evaluate a model."""
        self.model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                output = self.model(data)
                test_loss += F.nll_loss(output, target).item()
                pred = output.max(1)[1]
                correct += pred.eq(target).sum().item()
        test_loss /= len(test_loader)
        accuracy = 100. * correct / len(test_loader.dataset)
        return test_loss, accuracy


genome = {
    'nb_layers': {'val': 2, 'id': 17},
    'lr': {'val': 0.05, 'id': 811},
    'weight_decay': {'val': 0.00006, 'id': 402},
    'optimizer': {'val': 'sgd', 'id': 95},
    'layers': [
        {'nb_units': {'val': 256, 'id': 3}, 'dropout_rate': {'val': 0.2, 'id': 640},
         'activation': {'val': 'relu', 'id': 77}},
        {'nb_units': {'val': 128, 'id': 512}, 'dropout_rate': {'val': 0.1, 'id': 28},
         'activation': {'val': 'tanh', 'id': 931}},
    ],
}

protos = 0.25 * torch.randn(10, 1, 28, 28)
x_train, y_train = make_digits(3200, protos)
x_test, y_test = make_digits(800, protos)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=200)

net = CustomModel(genome)
print(net.model)
for epoch in range(1, 5):
    train_loss = net.train(train_loader, max_batches=50)
    test_loss, acc = net.test(test_loader)
    print(f'generation 0 | net 0 | epoch {epoch} | train loss {train_loss:.4f} | '
          f'test loss {test_loss:.4f} | test acc {acc:.2f}%')
