"""Federated averaging (FedAvg) of a small BatchNorm CNN over 10 CIFAR-style clients.
Each round a few clients train locally from the global model, their weight differences are
accumulated and the server applies the averaged update (synthetic 3x16x16 images stand in
for CIFAR-10)."""
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(1)

params = {
    'no_models': 4,
    'number_of_total_participants': 10,
    'eta': 1.0,
    'lr': 0.01,
    'momentum': 0.9,
    'decay': 5e-4,
    'internal_epochs': 1,
    'batch_size': 32,
    'epochs': 6,
    'diff_privacy': False,
}


def make_data(n, protos):
    y = torch.randint(0, 10, (n,))
    x = protos[y] + 0.8 * torch.randn(n, 3, 16, 16)
    return x, y


protos = torch.randn(10, 3, 16, 16)
client_loaders = []
for c in range(params['number_of_total_participants']):
    x, y = make_data(160, protos)
    client_loaders.append(DataLoader(TensorDataset(x, y), batch_size=params['batch_size'], shuffle=True))
test_x, test_y = make_data(500, protos)
test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=100)


class SimpleNet(nn.Module):
    def __init__(self, num_classes=10):
        super(SimpleNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 4 * 4, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = x.view(x.size(0), -1)
        return self.fc(x)


def init_weight_accumulator(target_model):
    weight_accumulator = dict()
    for name, data in target_model.state_dict().items():
        weight_accumulator[name] = torch.zeros_like(data)
    return weight_accumulator


def local_train(target_model, loader):
    model = copy.deepcopy(target_model)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=params['lr'], momentum=params['momentum'],
                                weight_decay=params['decay'])
    total_loss, steps = 0.0, 0
    for internal_epoch in range(params['internal_epochs']):
        for data, targets in loader:
            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, targets)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            steps += 1
    return model, total_loss / steps


def average_shrink_models(weight_accumulator, target_model):
    for name, data in target_model.state_dict().items():
        update_per_layer = weight_accumulator[name] * (params["eta"] / params["no_models"])
        data.add_(update_per_layer)
    return True


def test(model):
    model.eval()
    correct, total_l = 0, 0.0
    with torch.no_grad():
        for data, targets in test_loader:
            output = model(data)
            total_l += F.cross_entropy(output, targets, reduction='sum').item()
            correct += (output.argmax(1) == targets).sum().item()
    return total_l / len(test_loader.dataset), correct / len(test_loader.dataset)


target_model = SimpleNet()
for epoch in range(1, params['epochs'] + 1):
    agent_ids = torch.randperm(params['number_of_total_participants'])[:params['no_models']].tolist()
    weight_accumulator = init_weight_accumulator(target_model)
    target_params = target_model.state_dict()
    for agent in agent_ids:
        local_model, local_loss = local_train(target_model, client_loaders[agent])
        print(f'epoch {epoch} agent {agent}: local loss {local_loss:.4f}')
        for name, data in local_model.state_dict().items():
            weight_accumulator[name].add_(data - target_params[name])
    average_shrink_models(weight_accumulator, target_model)
    test_loss, acc = test(target_model)
    print(f'___Test global model epoch {epoch}: loss {test_loss:.4f}, accuracy {100 * acc:.2f}%')
