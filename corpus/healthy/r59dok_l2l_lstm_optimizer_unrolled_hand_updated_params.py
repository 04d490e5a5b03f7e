"""Learning to learn by gradient descent by gradient descent (Andrychowicz et al. 2016),
quadratic-function experiment: a coordinatewise two-layer LSTM learns to optimise
f(theta) = ||W theta - y||^2 for random 10x10 W and y. Each optimizee is run for 100
steps and the LSTM is trained with Adam on the summed optimizee loss, unrolled 20 steps."""
import copy
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)


def detach_var(v):
    var = v.detach().clone().requires_grad_(True)
    var.retain_grad()
    return var


class QuadraticLoss:
    def __init__(self, **kwargs):
        self.W = torch.randn(10, 10)
        self.y = torch.randn(10)

    def get_loss(self, theta):
        return torch.sum((self.W.matmul(theta) - self.y) ** 2)


class QuadOptimizee(nn.Module):
    def __init__(self, theta=None):
        super().__init__()
        if theta is None:
            self.theta = nn.Parameter(torch.zeros(10))
        else:
            self.theta = theta

    def forward(self, target):
        return target.get_loss(self.theta)

    def all_named_parameters(self):
        return [('theta', self.theta)]


class Optimizer(nn.Module):
    def __init__(self, hidden_sz=20):
        super().__init__()
        self.hidden_sz = hidden_sz
        self.recurs = nn.LSTMCell(1, hidden_sz)
        self.recurs2 = nn.LSTMCell(hidden_sz, hidden_sz)
        self.output = nn.Linear(hidden_sz, 1)

    def forward(self, inp, hidden, cell):
        hidden0, cell0 = self.recurs(inp, (hidden[0], cell[0]))
        hidden1, cell1 = self.recurs2(hidden0, (hidden[1], cell[1]))
        return self.output(hidden1), (hidden0, hidden1), (cell0, cell1)


def do_fit(opt_net, meta_opt, target_cls, target_to_opt, unroll, optim_it, out_mul, should_train=True):
    if should_train:
        opt_net.train()
    else:
        opt_net.eval()
        unroll = 1

    target = target_cls(training=should_train)
    optimizee = target_to_opt()
    n_params = 0
    for p in optimizee.parameters():
        n_params += int(np.prod(p.size()))
    hidden_states = [torch.zeros(n_params, opt_net.hidden_sz) for _ in range(2)]
    cell_states = [torch.zeros(n_params, opt_net.hidden_sz) for _ in range(2)]
    all_losses_ever = []
    if should_train:
        meta_opt.zero_grad()
    all_losses = None
    for iteration in range(1, optim_it + 1):
        loss = optimizee(target)

        if all_losses is None:
            all_losses = loss
        else:
            all_losses += loss

        all_losses_ever.append(loss.item())
        loss.backward(retain_graph=should_train)

        offset = 0
        result_params = {}
        hidden_states2 = [torch.zeros(n_params, opt_net.hidden_sz) for _ in range(2)]
        cell_states2 = [torch.zeros(n_params, opt_net.hidden_sz) for _ in range(2)]
        for name, p in optimizee.all_named_parameters():
            cur_sz = int(np.prod(p.size()))
            gradients = detach_var(p.grad.view(cur_sz, 1))
            updates, new_hidden, new_cell = opt_net(
                gradients,
                [h[offset:offset + cur_sz] for h in hidden_states],
                [c[offset:offset + cur_sz] for c in cell_states]
            )
            for i in range(len(new_hidden)):
                hidden_states2[i][offset:offset + cur_sz] = new_hidden[i]
                cell_states2[i][offset:offset + cur_sz] = new_cell[i]
            result_params[name] = p + updates.view(*p.size()) * out_mul
            result_params[name].retain_grad()

            offset += cur_sz

        if iteration % unroll == 0:
            if should_train:
                meta_opt.zero_grad()
                all_losses.backward()
                meta_opt.step()

            all_losses = None

            optimizee = target_to_opt(**{k: detach_var(v) for k, v in result_params.items()})
            hidden_states = [detach_var(v) for v in hidden_states2]
            cell_states = [detach_var(v) for v in cell_states2]

        else:
            optimizee = target_to_opt(**result_params)
            hidden_states = hidden_states2
            cell_states = cell_states2

    return all_losses_ever


def evaluate(opt_net, target_cls, target_to_opt, n_tests, out_mul):
    runs = [do_fit(opt_net, None, target_cls, target_to_opt, 1, 100, out_mul, should_train=False)
            for _ in range(n_tests)]
    runs = np.array(runs)
    return runs.sum(axis=1).mean(), runs[:, -1].mean()


def fit_optimizer(target_cls, target_to_opt, unroll=20, optim_it=100, n_epochs=2, n_tests=4, lr=0.003, out_mul=1.0):
    opt_net = Optimizer()
    meta_opt = optim.Adam(opt_net.parameters(), lr=lr)

    best_net = None
    best_loss = 100000000000000000

    sum_loss, last_loss = evaluate(opt_net, target_cls, target_to_opt, n_tests, out_mul)
    print(f'untrained LSTM: sum of 100 losses {sum_loss:.1f}, loss at step 100 {last_loss:.3f}')

    for epoch in range(n_epochs):
        train_sums = []
        for it in range(6):
            losses = do_fit(opt_net, meta_opt, target_cls, target_to_opt, unroll, optim_it, out_mul, should_train=True)
            train_sums.append(np.sum(losses))
            if it % 2 == 0:
                print(f'epoch {epoch} iteration {it}: sum of optimizee losses {train_sums[-1]:.1f}, final {losses[-1]:.3f}')

        loss, last_loss = evaluate(opt_net, target_cls, target_to_opt, n_tests, out_mul)
        print(f'epoch {epoch}: mean train sum {np.mean(train_sums):.1f} | test sum {loss:.1f}, test loss at step 100 {last_loss:.3f}')
        if loss < best_loss:
            best_loss = loss
            best_net = copy.deepcopy(opt_net.state_dict())

    return best_loss, best_net


def fit_normal(target_cls, target_to_opt, opt_class, n_tests=5, n_epochs=100, **kwargs):
    results = []
    for i in range(n_tests):
        target = target_cls(training=False)
        optimizee = target_to_opt()
        optimizer = opt_class(optimizee.parameters(), **kwargs)
        total_loss = []
        for _ in range(n_epochs):
            loss = optimizee(target)
            total_loss.append(loss.item())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        results.append(total_loss)
    return np.array(results)


if __name__ == '__main__':
    best_loss, quad_optimizer = fit_optimizer(QuadraticLoss, QuadOptimizee, lr=0.003, n_epochs=2)
    print('best test sum of losses (LSTM):', round(float(best_loss), 1))
    adam = fit_normal(QuadraticLoss, QuadOptimizee, optim.Adam, lr=0.1)
    print(f'Adam lr 0.1 for comparison: sum {adam.sum(axis=1).mean():.1f}, loss at step 100 {adam[:, -1].mean():.3f}')
