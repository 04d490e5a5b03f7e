"""Continual learning with Elastic Weight Consolidation on two synthetic digit-like tasks.

Task A is learned first, then the Fisher information of the parameters is estimated on task A
and the model moves on to task B with the EWC penalty keeping the important weights in place.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd, optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


def make_task(n, seed, permute_seed=None):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 1, 28, 28, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y] + 1.0 * torch.randn(n, 1, 28, 28, generator=g)
    if permute_seed is not None:
        perm = torch.randperm(28 * 28, generator=torch.Generator().manual_seed(permute_seed))
        x = x.view(n, -1)[:, perm].view(n, 1, 28, 28)
    return TensorDataset(x, y)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class ElasticWeightConsolidation:
    def __init__(self, model, crit, lr=0.001, weight=1000):
        self.model = model
        self.weight = weight
        self.crit = crit
        self.optimizer = optim.Adam(self.model.parameters(), lr)

    def _update_mean_params(self):
        for param_name, param in self.model.named_parameters():
            _buff_param_name = param_name.replace('.', '__')
            self.model.register_buffer(_buff_param_name + '_estimated_mean', param.data.clone())

    def _update_fisher_params(self, current_ds, batch_size, num_batch):
        dl = DataLoader(current_ds, batch_size, shuffle=True)
        log_liklihoods = []
        for i, (input, target) in enumerate(dl):
            if i > num_batch:
                break
            output = F.log_softmax(self.model(input), dim=1)
            log_liklihoods.append(output[:, target])
        log_likelihood = torch.cat(log_liklihoods).mean()
        grad_log_liklihood = autograd.grad(log_likelihood, self.model.parameters())
        _buff_param_names = [param[0].replace('.', '__') for param in self.model.named_parameters()]
        for _buff_param_name, param in zip(_buff_param_names, grad_log_liklihood):
            self.model.register_buffer(_buff_param_name + '_estimated_fisher', param.data.clone() ** 2)

    def register_ewc_params(self, dataset, batch_size, num_batches):
        self._update_fisher_params(dataset, batch_size, num_batches)
        self._update_mean_params()

    def _compute_consolidation_loss(self, weight):
        try:
            losses = []
            for param_name, param in self.model.named_parameters():
                _buff_param_name = param_name.replace('.', '__')
                estimated_mean = getattr(self.model, '{}_estimated_mean'.format(_buff_param_name))
                estimated_fisher = getattr(self.model, '{}_estimated_fisher'.format(_buff_param_name))
                losses.append((estimated_fisher * (param - estimated_mean) ** 2).sum())
            return (weight / 2) * sum(losses)
        except AttributeError:
            return 0

    def forward_backward_update(self, input, target):
        output = self.model(input)
        loss = self._compute_consolidation_loss(self.weight) + self.crit(output, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def accuracy(model, ds):
    model.eval()
    with torch.no_grad():
        x, y = ds.tensors
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def main():
    task_a, task_a_test = make_task(4096, 1), make_task(512, 2)
    task_b, task_b_test = make_task(1024, 3, permute_seed=11), make_task(512, 4, permute_seed=11)

    model = ConvNet()
    ewc = ElasticWeightConsolidation(model, crit=nn.CrossEntropyLoss(), lr=1e-3)

    for name, ds in [("A", task_a), ("B", task_b)]:
        loader = DataLoader(ds, batch_size=64, shuffle=True)
        for epoch in range(1):
            for i, (x, y) in enumerate(loader):
                loss = ewc.forward_backward_update(x, y)
                if i % 8 == 0:
                    print(f"task {name} epoch {epoch} step {i}: loss {loss:.4f}")
            print(f"task {name} epoch {epoch}: acc A {accuracy(model, task_a_test):.3f}  "
                  f"acc B {accuracy(model, task_b_test):.3f}")
        if name == "A":
            ewc.register_ewc_params(task_a, batch_size=64, num_batches=len(task_a) // 64)
            print("registered EWC parameters for task A")


if __name__ == "__main__":
    main()
