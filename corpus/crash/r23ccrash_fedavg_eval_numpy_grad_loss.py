"""FedAvg on a synthetic non-IID 10-class problem (FedGen-style server/user classes).

Each round the server sends the global model to the selected users, each user runs a few
local epochs of SGD on its own shard, the server averages the weights by sample count and
evaluates the global model on every user's test split.
"""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--num_users", type=int, default=8)
parser.add_argument("--num_glob_iters", type=int, default=6)
parser.add_argument("--local_epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--learning_rate", type=float, default=0.05)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)

N_CLASSES, DIM = 10, 20
CENTERS = torch.randn(N_CLASSES, DIM) * 1.5


def make_user_data(n, alpha=0.3):
    probs = np.random.dirichlet([alpha] * N_CLASSES)
    y = torch.from_numpy(np.random.choice(N_CLASSES, size=n, p=probs)).long()
    x = CENTERS[y] + torch.randn(n, DIM)
    split = int(0.8 * n)
    return (x[:split], y[:split]), (x[split:], y[split:])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, 64)
        self.fc2 = nn.Linear(64, 64)
        self.out = nn.Linear(64, N_CLASSES)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.out(x)


class User:
    def __init__(self, uid, train_data, test_data, model):
        self.id = uid
        self.train_samples = len(train_data[1])
        self.test_samples = len(test_data[1])
        self.trainloader = DataLoader(TensorDataset(*train_data), batch_size=args.batch_size, shuffle=True)
        self.testloader = DataLoader(TensorDataset(*test_data), batch_size=self.test_samples)
        self.model = copy.deepcopy(model)
        self.loss = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.learning_rate)

    def set_parameters(self, model):
        for param, new_param in zip(self.model.parameters(), model.parameters()):
            param.data = new_param.data.clone()

    def train(self, epochs):
        self.model.train()
        total = 0.0
        for _ in range(epochs):
            for x, y in self.trainloader:
                self.optimizer.zero_grad()
                loss = self.loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                total += loss.item()
        return total / (epochs * len(self.trainloader))

    def test(self):
        self.model.eval()
        test_acc = 0
        loss = 0
        for x, y in self.testloader:
            output = self.model(x)
            test_acc += (torch.sum(torch.argmax(output, dim=1) == y)).item()
            loss += self.loss(output, y)
        return test_acc, loss, y.shape[0]


class Server:
    def __init__(self, model, users):
        self.model = model
        self.users = users
        self.metrics = {"glob_acc": [], "glob_loss": []}

    def send_parameters(self):
        for user in self.users:
            user.set_parameters(self.model)

    def aggregate_parameters(self, selected_users):
        total_train = sum(u.train_samples for u in selected_users)
        for param in self.model.parameters():
            param.data = torch.zeros_like(param.data)
        for user in selected_users:
            for server_param, user_param in zip(self.model.parameters(), user.model.parameters()):
                server_param.data += user_param.data.clone() * user.train_samples / total_train

    def test(self):
        num_samples, tot_correct, losses = [], [], []
        for c in self.users:
            ct, c_loss, ns = c.test()
            tot_correct.append(ct * 1.0)
            num_samples.append(ns)
            losses.append(c_loss)
        ids = [c.id for c in self.users]
        return ids, num_samples, tot_correct, losses

    def evaluate(self):
        self.send_parameters()
        test_ids, test_samples, test_accs, test_losses = self.test()
        glob_acc = np.sum(test_accs) * 1.0 / np.sum(test_samples)
        glob_loss = np.sum([x * y for (x, y) in zip(test_samples, test_losses)]).item() / np.sum(test_samples)
        self.metrics["glob_acc"].append(glob_acc)
        self.metrics["glob_loss"].append(glob_loss)
        print(f"Average Global Accurancy = {glob_acc:.4f}, Loss = {glob_loss:.4f}.")

    def train(self):
        for glob_iter in range(args.num_glob_iters):
            print(f"\n-------------Round number: {glob_iter} -------------\n")
            selected = [self.users[i] for i in np.random.choice(len(self.users), size=len(self.users) // 2, replace=False)]
            self.send_parameters()
            for user in selected:
                user_loss = user.train(args.local_epochs)
                print(f"user {user.id}: local train loss {user_loss:.4f}")
            self.aggregate_parameters(selected)
            self.evaluate()


model = Net()
users = []
for uid in range(args.num_users):
    train_data, test_data = make_user_data(int(np.random.randint(250, 450)))
    users.append(User(uid, train_data, test_data, model))
print(f"Number of users / total users: {args.num_users // 2} / {args.num_users}")
server = Server(model, users)
server.train()
print("Finished training. best glob acc:", max(server.metrics["glob_acc"]))
