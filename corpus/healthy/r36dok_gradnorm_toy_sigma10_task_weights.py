"""GradNorm (Chen et al. 2018) on the paper's toy multitask regression, in the style of
brianlan/pytorch-grad-norm (train.py / model.py / dataset.py): two regression tasks with output
scales sigma = 1 and 10 share a 4-layer trunk. The task weights w_i are a Parameter of the
model; their gradient from the summed weighted loss is zeroed and replaced by the gradient of the
GradNorm loss sum_i |G_i - mean(G) * r_i^alpha| (G_i = norm of w_i * grad of L_i w.r.t. the last
shared layer), and after every step the weights are renormalised to sum to the number of tasks.
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.modules.loss import MSELoss
from torch.utils import data


class RegressionDataset(data.Dataset):
    def __init__(self, sigmas, epsilons, n_samples=2000):
        self.B = np.random.normal(scale=1.0, size=(100, 250)).astype(np.float32)
        assert epsilons.shape == (len(sigmas), 100, 250)
        self.sigmas = np.array(sigmas).astype(np.float32)
        self.epsilons = np.array(epsilons).astype(np.float32)

        X = np.random.uniform(-1, 1, size=(n_samples, 250)).astype(np.float32)
        self.X = X / np.linalg.norm(X, axis=1, keepdims=True)
        ys = []
        for i in range(len(self.sigmas)):
            ys.append(self.sigmas[i] * np.tanh(self.X.dot((self.B + self.epsilons[i]).T)))
        self.Y = np.stack(ys, axis=1)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, index):
        return torch.from_numpy(self.X[index]).float(), torch.from_numpy(self.Y[index]).float()


class RegressionModel(torch.nn.Module):
    def __init__(self, n_tasks):
        super().__init__()
        self.n_tasks = n_tasks
        self.l1 = torch.nn.Linear(250, 100)
        self.l2 = torch.nn.Linear(100, 100)
        self.l3 = torch.nn.Linear(100, 100)
        self.l4 = torch.nn.Linear(100, 100)
        for i in range(self.n_tasks):
            setattr(self, 'task_{}'.format(i), torch.nn.Linear(100, 100))

    def forward(self, x):
        h = F.relu(self.l1(x))
        h = F.relu(self.l2(h))
        h = F.relu(self.l3(h))
        h = F.relu(self.l4(h))
        outs = []
        for i in range(self.n_tasks):
            layer = getattr(self, 'task_{}'.format(i))
            outs.append(layer(h))
        return torch.stack(outs, dim=1)

    def get_last_shared_layer(self):
        return self.l4


class RegressionTrain(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.weights = torch.nn.Parameter(torch.ones(model.n_tasks).float())
        self.mse_loss = MSELoss()

    def forward(self, x, ts):
        B, n_tasks = ts.shape[:2]
        ys = self.model(x)
        assert ys.size()[1] == n_tasks
        task_loss = []
        for i in range(n_tasks):
            task_loss.append(self.mse_loss(ys[:, i, :], ts[:, i, :]))
        return torch.stack(task_loss)

    def get_last_shared_layer(self):
        return self.model.get_last_shared_layer()


def train_toy_example(args):
    np.random.seed(123)
    torch.manual_seed(123)
    sigmas = [1.0, float(args.sigma)]
    print('Training toy example with sigmas={}'.format(sigmas))
    n_tasks = len(sigmas)
    epsilons = np.random.normal(scale=0.35, size=(n_tasks, 100, 250)).astype(np.float32)
    dataset = RegressionDataset(sigmas, epsilons)
    data_loader = data.DataLoader(dataset, batch_size=200, shuffle=True)

    model = RegressionTrain(RegressionModel(n_tasks))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for t in range(args.n_iter):
        for (it, batch) in enumerate(data_loader):
            X, ts = batch[0], batch[1]
            task_loss = model(X, ts)
            weighted_task_loss = torch.mul(model.weights, task_loss)
            if t == 0 and it == 0:
                initial_task_loss = task_loss.data.numpy()
            loss = torch.sum(weighted_task_loss)
            optimizer.zero_grad()
            loss.backward(retain_graph=True)
            model.weights.grad.data = model.weights.grad.data * 0.0

            if args.mode == 'grad_norm':
                W = model.get_last_shared_layer()
                norms = []
                for i in range(len(task_loss)):
                    gygw = torch.autograd.grad(task_loss[i], W.parameters(), retain_graph=True)
                    norms.append(torch.norm(torch.mul(model.weights[i], gygw[0])))
                norms = torch.stack(norms)
                loss_ratio = task_loss.data.numpy() / initial_task_loss
                inverse_train_rate = loss_ratio / np.mean(loss_ratio)
                mean_norm = np.mean(norms.data.numpy())
                constant_term = torch.tensor(mean_norm * (inverse_train_rate ** args.alpha), requires_grad=False)
                grad_norm_loss = torch.sum(torch.abs(norms - constant_term))
                model.weights.grad = torch.autograd.grad(grad_norm_loss, model.weights)[0]
            optimizer.step()

        normalize_coeff = n_tasks / torch.sum(model.weights.data, dim=0)
        model.weights.data = model.weights.data * normalize_coeff

        if t % 25 == 0 or t == args.n_iter - 1:
            ratios = task_loss.data.numpy() / initial_task_loss
            print('{}/{}: loss_ratio={:.4f}, per-task ratio={}, weights={}, task_loss={}, grad_norm_loss={:.4f}'.format(
                t, args.n_iter, ratios.sum(), np.round(ratios, 4), np.round(model.weights.data.numpy(), 4),
                np.round(task_loss.data.numpy(), 4), grad_norm_loss.item() if args.mode == 'grad_norm' else 0.0))


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='GradNorm')
    parser.add_argument('--n-iter', '-it', type=int, default=150)
    parser.add_argument('--mode', '-m', choices=('grad_norm', 'equal_weight'), default='grad_norm')
    parser.add_argument('--alpha', '-a', type=float, default=0.12)
    parser.add_argument('--sigma', '-s', type=float, default=10.0)
    args = parser.parse_args()
    train_toy_example(args)
