"""Deep fully connected ReZero network (64 residual ReLU layers) trained with Adagrad, following
tbachlechner/ReZero-examples' 'ReZero-Deep_Fast_NeuralNetwork' notebook: DeepNN with a learnable
per-layer residual weight initialised to zero (x = x + resweight[i] * relu(linear_layers[i](x))),
xavier_normal(gain sqrt 2) hidden weights, kaiming input layer, CrossEntropyLoss, Adagrad lr 0.01,
batch 100, epoch-level loss prints. CIFAR-10 replaced by synthetic 3x16x16 'images' of 10 classes
(smoothed random templates, random shifts, pixel noise).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

########################################################################
# Synthetic stand-in for CIFAR-10 (normalised to roughly [-1, 1])

def make_split(n, templates, g):
    y = torch.randint(0, 10, (n,), generator=g)
    x = templates[y]
    shifts = torch.randint(-3, 4, (n, 2), generator=g)
    x = torch.stack([torch.roll(xi, shifts=(int(s[0]), int(s[1])), dims=(1, 2)) for xi, s in zip(x, shifts)])
    x = x + 1.0 * torch.randn(x.shape, generator=g)
    return x.clamp(-1, 1), y


g = torch.Generator().manual_seed(123)
templates = torch.randn(10, 3, 16, 16, generator=g)
templates = F.avg_pool2d(F.pad(templates, (2, 2, 2, 2), mode='circular'), 5, stride=1)
templates = templates / templates.abs().amax(dim=(1, 2, 3), keepdim=True)
x_train, y_train = make_split(3000, templates, g)
x_test, y_test = make_split(1000, templates, g)

batchsize = 100
trainloader = DataLoader(TensorDataset(x_train, y_train), batch_size=batchsize, shuffle=True)
testloader = DataLoader(TensorDataset(x_test, y_test), batch_size=500, shuffle=False)
device = torch.device("cpu")


########################################################################
# Define fully connected network with ReLu activations and
# architectures :'ReZero', 'LayerNorm', 'Residual', 'Vanilla'

class DeepNN(nn.Module):
    def __init__(self, lr, width, depth, version):
        super(DeepNN, self).__init__()
        self.linear_input = nn.Linear(3 * 16 * 16, width)
        self.linear_layers = nn.ModuleList([nn.Linear(width, width) for i in range(depth)])
        self.linear_output = nn.Linear(width, 10)
        self.version = version
        if self.version == 'ReZero':
            self.resweight = nn.Parameter(torch.zeros(depth), requires_grad=True)
        if self.version == 'LayerNorm':
            self.ln = torch.nn.LayerNorm((width))
        # Initialize:
        torch.nn.init.kaiming_normal_(self.linear_input.weight, a=0, mode='fan_in', nonlinearity='relu')
        for i in range(depth):
            if self.version == 'ReZero':
                torch.nn.init.xavier_normal_(self.linear_layers[i].weight, gain=torch.sqrt(torch.tensor(2.)))
            elif self.version == 'Vanilla':
                torch.nn.init.xavier_normal_(self.linear_layers[i].weight, gain=torch.sqrt(torch.tensor(2.)))
            elif self.version == 'Residual':
                torch.nn.init.xavier_normal_(self.linear_layers[i].weight, gain=torch.sqrt(torch.tensor(0.25)))
            elif self.version == 'LayerNorm':
                torch.nn.init.xavier_normal_(self.linear_layers[i].weight, gain=torch.sqrt(torch.tensor(2.)))

    def forward(self, x):
        x = x.view(-1, 3 * 16 * 16)
        x = F.relu(self.linear_input(x))
        for i, j in enumerate(self.linear_layers):
            if self.version == 'ReZero':
                x = x + self.resweight[i] * torch.relu(self.linear_layers[i](x))
            elif self.version == 'Vanilla':
                x = F.relu(self.linear_layers[i](x))
            elif self.version == 'Residual':
                x = x + F.relu(self.linear_layers[i](x))
            elif self.version == 'LayerNorm':
                x = self.ln(F.relu(self.linear_layers[i](x)))
        x = self.linear_output(x)
        return x


def evaluate(model):
    model.eval()
    correct, total, loss = 0, 0, 0.0
    with torch.no_grad():
        for inputs, labels in testloader:
            outputs = model(inputs)
            loss += F.cross_entropy(outputs, labels, reduction='sum').item()
            correct += (outputs.argmax(1) == labels).sum().item()
            total += labels.size(0)
    model.train()
    return loss / total, correct / total


def setup_and_train(epochs, lr, width, depth, version):
    ######################################################################
    # Model setup
    model = DeepNN(lr, width, depth, version)
    model.to(device)
    ######################################################################
    # Define criterion and optimizer
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=1.0)

    test_loss, test_acc = evaluate(model)
    print('| before training | test loss {:5.3f} | test acc {:5.3f}'.format(test_loss, test_acc))
    ######################################################################
    # Train the model
    model.train()
    for epoch in range(epochs):  # loop over the dataset multiple times
        epoch_start_time = time.time()
        running_loss = 0.0
        for batch, data in enumerate(trainloader, 0):
            # get the inputs; data is a list of [inputs, labels]
            inputs, labels = data[0].to(device), data[1].to(device)

            # zero the parameter gradients
            optimizer.zero_grad()

            # forward + backward + optimize
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            # print statistics
            running_loss += loss.item()
        cur_loss = running_loss / (batch + 1)
        test_loss, test_acc = evaluate(model)
        print('| end of epoch {:3d} | time / epoch {:5.2f}s | loss {:5.2f} | test loss {:5.3f} | test acc {:5.3f}'.format(
            epoch + 1, (time.time() - epoch_start_time), cur_loss, test_loss, test_acc))
        running_loss = 0.
    print('resweight (first 8):', [round(v, 3) for v in model.resweight[:8].tolist()])
    return model


######################################################################
# The model is set up with the hyperparameter below.

version = 'ReZero'   # Architecture
epochs = 6           # Number of epochs
depth = 64           # Number of layers
width = 128          # Width
lr = 0.01            # Learning rate for Adagrad optimizer

setup_and_train(epochs, lr, width, depth, version)
