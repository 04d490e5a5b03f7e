"""Personalised federated learning with pFedMe (Moreau-envelope personalisation) on
the Synthetic(alpha, beta) non-IID tabular benchmark: 60 features, 10 classes, one
data shard per user. Each user approximately solves its personalised problem with K
steps of the pFedMe inner optimiser, then moves its local model towards the
personalised one; the server averages the local models.
"""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Optimizer
from torch.utils.data import DataLoader, TensorDataset


def generate_synthetic(alpha=0.5, beta=0.5, n_users=8, dim=60, n_classes=10, seed=1):
    rng = np.random.default_rng(seed)
    samples = rng.lognormal(4, 1, n_users).astype(int) + 60
    cov = np.diag(np.array([(j + 1) ** -1.2 for j in range(dim)]))
    users = []
    for k in range(n_users):
        u = rng.normal(0, alpha)
        B = rng.normal(0, beta)
        v = rng.normal(B, 1, dim)
        W = rng.normal(u, 1, (dim, n_classes))
        b = rng.normal(u, 1, n_classes)
        x = rng.multivariate_normal(v, cov, samples[k]).astype(np.float32)
        y = np.argmax(x @ W + b, axis=1)
        users.append((torch.from_numpy(x), torch.from_numpy(y).long()))
    return users


class DNN(nn.Module):
    def __init__(self, input_dim=60, mid_dim=20, output_dim=10):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, mid_dim)
        self.fc2 = nn.Linear(mid_dim, output_dim)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


class pFedMeOptimizer(Optimizer):
    def __init__(self, params, lr=0.01, lamda=0.1, mu=0.001):
        defaults = dict(lr=lr, lamda=lamda, mu=mu)
        super().__init__(params, defaults)

    def step(self, local_weight_updated, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        weight_update = local_weight_updated.copy()
        for group in self.param_groups:
            for p, localweight in zip(group["params"], weight_update):
                p.data = p.data - group["lr"] * (p.grad.data + group["lamda"] * (p.data - localweight.data) + group["mu"] * p.data)
        return group["params"], loss


class UserpFedMe:
    def __init__(self, uid, x, y, model, batch_size, learning_rate, personal_learning_rate, lamda, local_epochs, K):
        n_train = int(0.75 * len(y))
        self.id = uid
        self.train_loader = DataLoader(TensorDataset(x[:n_train], y[:n_train]), batch_size=batch_size, shuffle=True)
        self.test_data = (x[n_train:], y[n_train:])
        self.train_samples = n_train
        self.model = copy.deepcopy(model)
        self.local_model = copy.deepcopy(list(self.model.parameters()))
        self.persionalized_model_bar = copy.deepcopy(list(self.model.parameters()))
        self.loss = nn.NLLLoss()
        self.learning_rate = learning_rate
        self.lamda = lamda
        self.local_epochs = local_epochs
        self.K = K
        self.optimizer = pFedMeOptimizer(self.model.parameters(), lr=personal_learning_rate, lamda=lamda)
        self.iter_loader = iter(self.train_loader)

    def set_parameters(self, model):
        for old, new, local in zip(self.model.parameters(), model.parameters(), self.local_model):
            old.data = new.data.clone()
            local.data = new.data.clone()

    def get_next_train_batch(self):
        try:
            return next(self.iter_loader)
        except StopIteration:
            self.iter_loader = iter(self.train_loader)
            return next(self.iter_loader)

    def train(self):
        losses = []
        self.model.train()
        for _ in range(self.local_epochs):
            X, y = self.get_next_train_batch()
            for _ in range(self.K):
                self.optimizer.zero_grad()
                loss = self.loss(self.model(X), y)
                loss.backward()
                self.persionalized_model_bar, _ = self.optimizer.step(self.local_model)
                losses.append(loss.item())
            for new_param, localweight in zip(self.persionalized_model_bar, self.local_model):
                localweight.data = localweight.data - self.lamda * self.learning_rate * (localweight.data - new_param.data)
        for param, local in zip(self.model.parameters(), self.local_model):
            param.data = local.data.clone()
        return float(np.mean(losses))

    def test(self):
        self.model.eval()
        x, y = self.test_data
        with torch.no_grad():
            out = self.model(x)
        return (out.argmax(1) == y).sum().item(), len(y), self.loss(out, y).item() * len(y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_global_iters", type=int, default=5)
    parser.add_argument("--local_epochs", type=int, default=20)
    parser.add_argument("--K", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=20)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--personal_learning_rate", type=float, default=0.2)
    parser.add_argument("--lamda", type=float, default=15)
    parser.add_argument("--beta", type=float, default=1.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = generate_synthetic()
    server_model = DNN()
    users = [UserpFedMe(k, x, y, server_model, args.batch_size, args.learning_rate, args.personal_learning_rate,
                        args.lamda, args.local_epochs, args.K) for k, (x, y) in enumerate(data)]
    total_train = sum(u.train_samples for u in users)

    for glob_iter in range(args.num_global_iters):
        for user in users:
            user.set_parameters(server_model)
        train_losses = [user.train() for user in users]

        previous_param = copy.deepcopy(list(server_model.parameters()))
        for p in server_model.parameters():
            p.data = torch.zeros_like(p.data)
        for user in users:
            for server_p, user_p in zip(server_model.parameters(), user.local_model):
                server_p.data += user_p.data.clone() * user.train_samples / total_train
        for pre_p, p in zip(previous_param, server_model.parameters()):
            p.data = (1 - args.beta) * pre_p.data + args.beta * p.data

        for user in users:
            user.set_parameters(server_model)
        correct, count, test_loss = map(sum, zip(*[u.test() for u in users]))
        print(f"-------------Round number: {glob_iter} -------------")
        print(f"Average Global Trainning Loss: {np.mean(train_losses):.4f}")
        print(f"Average Global Accurancy: {correct / count:.4f}  Global Test Loss: {test_loss / count:.4f}")


if __name__ == "__main__":
    main()
