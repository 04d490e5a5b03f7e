"""Meta-learning fine-tuning of a sentence classifier (learning a good initialisation).

An inner loop runs differentiable SGD on copies of the classifier weights (the weights are
not copied out of the graph, like higher.innerloop_ctx(copy_initial_weights=False)); after
the unroll the fast model's loss on a dev batch is backpropagated to the initial weights,
which a meta optimizer updates. Sentence embeddings are synthetic 512-dim vectors.
"""
import resource

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 4
EMB_DIM = 512


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(NUM_CLASSES, EMB_DIM, generator=torch.Generator().manual_seed(123))
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    x = 0.35 * centers[y] + torch.randn(n, EMB_DIM, generator=g)
    return x, y


class SentenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(EMB_DIM, 1024), nn.GELU(),
            nn.Linear(1024, 1024), nn.GELU(),
        )
        self.head = nn.Linear(1024, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x))


class DifferentiableSGD:
    """Functional SGD step that keeps the update in the autograd graph."""

    def __init__(self, lr):
        self.lr = lr

    def step(self, loss, params):
        names = list(params.keys())
        grads = torch.autograd.grad(loss, [params[n] for n in names], create_graph=True)
        return {n: params[n] - self.lr * g for n, g in zip(names, grads)}


def report_memory():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction='sum').item()
            correct += (logits.argmax(1) == y).sum().item()
            total += y.numel()
    return loss_sum / total, correct / total


def main():
    x_tr, y_tr = make_split(3840, 1)
    x_dev, y_dev = make_split(512, 2)
    train_loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=64, shuffle=True)
    dev_loader = DataLoader(TensorDataset(x_dev, y_dev), batch_size=128, shuffle=True)
    eval_loader = DataLoader(TensorDataset(x_dev, y_dev), batch_size=256)

    model = SentenceClassifier()
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    diffopt = DifferentiableSGD(lr=0.05)
    num_epochs = 2
    unroll_steps = len(train_loader)

    for epoch in range(num_epochs):
        model.train()
        dev_iter = iter(dev_loader)
        epoch_iterator = train_loader
        fast_params = None
        for step, (x, y) in enumerate(epoch_iterator):
            if step % unroll_steps == 0:
                fast_params = dict(model.named_parameters())
            logits = functional_call(model, fast_params, (x,))
            loss = F.cross_entropy(logits, y)
            fast_params = diffopt.step(loss, fast_params)
            if step % 10 == 0:
                print('epoch {} step {} inner loss {:.4f} max rss {:.0f} MB'.format(
                    epoch, step, loss.item(), report_memory()))
            if (step + 1) % unroll_steps == 0 or step + 1 == len(train_loader):
                try:
                    xd, yd = next(dev_iter)
                except StopIteration:
                    dev_iter = iter(dev_loader)
                    xd, yd = next(dev_iter)
                meta_loss = F.cross_entropy(functional_call(model, fast_params, (xd,)), yd)
                meta_opt.zero_grad()
                meta_loss.backward()
                meta_opt.step()
                fast_params = None
                print('epoch {} step {} meta loss {:.4f}'.format(epoch, step, meta_loss.item()))
        dev_loss, dev_acc = evaluate(model, eval_loader)
        print('epoch {} dev loss {:.4f} dev acc {:.4f} max rss {:.0f} MB'.format(
            epoch, dev_loss, dev_acc, report_memory()))


if __name__ == '__main__':
    main()
