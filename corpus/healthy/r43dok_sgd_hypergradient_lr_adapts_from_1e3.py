"""MLP classifier trained with SGD-HD (online learning-rate adaptation by hypergradient descent)."""
from functools import reduce

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer, required
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(1)


class SGDHD(Optimizer):
    def __init__(self, params, lr=required, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False, hypergrad_lr=1e-6):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, hypergrad_lr=hypergrad_lr)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super(SGDHD, self).__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("SGDHD doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]['params']
        self._params_numel = reduce(lambda total, p: total + p.numel(), self._params, 0)

    def _gather_flat_grad_with_weight_decay(self, weight_decay=0):
        views = []
        for p in self._params:
            if p.grad is None:
                view = torch.zeros_like(p.data).view(-1)
            else:
                view = p.grad.data.view(-1)
            if weight_decay != 0:
                view.add_(p.data.view(-1), alpha=weight_decay)
            views.append(view)
        return torch.cat(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.data.add_(update[offset:offset + numel].view_as(p.data), alpha=step_size)
            offset += numel
        assert offset == self._params_numel

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        group = self.param_groups[0]
        weight_decay = group['weight_decay']
        momentum = group['momentum']
        dampening = group['dampening']
        nesterov = group['nesterov']

        grad = self._gather_flat_grad_with_weight_decay(weight_decay)

        state = self.state[self._params[0]]
        if len(state) == 0:
            state['grad_prev'] = torch.zeros_like(grad)

        grad_prev = state['grad_prev']
        h = torch.dot(grad, grad_prev)
        group['lr'] += group['hypergrad_lr'] * h

        if momentum != 0:
            if 'momentum_buffer' not in state:
                buf = state['momentum_buffer'] = torch.zeros_like(grad)
                buf.mul_(momentum).add_(grad)
            else:
                buf = state['momentum_buffer']
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad.add_(buf, alpha=momentum)
            else:
                grad = buf

        state['grad_prev'] = grad
        self._add_grad(-float(group['lr']), grad)
        return loss


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim):
        super(MLP, self).__init__()
        self.input_dim = input_dim
        self.lin1 = nn.Linear(input_dim, hidden_dim)
        self.lin2 = nn.Linear(hidden_dim, hidden_dim)
        self.lin3 = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        x = F.relu(self.lin1(x.view(-1, self.input_dim)))
        x = F.relu(self.lin2(x))
        return F.log_softmax(self.lin3(x), dim=1)


def make_data(n, centers, gen):
    y = torch.randint(0, centers.size(0), (n,), generator=gen)
    x = centers[y] + 1.2 * torch.randn(n, centers.size(1), generator=gen)
    return x, y


gen = torch.Generator().manual_seed(7)
centers = torch.randn(10, 100, generator=gen) * 0.5
train_x, train_y = make_data(6400, centers, gen)
valid_x, valid_y = make_data(2000, centers, gen)
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=128, shuffle=True)

model = MLP(100, 256, 10)
optimizer = SGDHD(model.parameters(), lr=0.001, momentum=0.9, nesterov=True, weight_decay=0.0001, hypergrad_lr=0.001)


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(valid_x)
        loss = F.nll_loss(output, valid_y).item()
        acc = (output.argmax(1) == valid_y).float().mean().item()
    model.train()
    return loss, acc


loss0, acc0 = evaluate()
print('epoch 0 | valid loss {:.4f} acc {:.3f} | lr {:.6f}'.format(loss0, acc0, 0.001))
iteration = 0
for epoch in range(1, 5):
    model.train()
    epoch_loss = 0.0
    for i, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        iteration += 1
        epoch_loss += loss.item()
        lr = float(optimizer.param_groups[0]['lr'])
        if iteration % 25 == 0:
            print('iter {} | train loss {:.4f} | lr {:.6f}'.format(iteration, loss.item(), lr))
    vloss, vacc = evaluate()
    print('epoch {} | train loss {:.4f} | valid loss {:.4f} acc {:.3f} | lr {:.6f}'.format(
        epoch, epoch_loss / (i + 1), vloss, vacc, lr))
