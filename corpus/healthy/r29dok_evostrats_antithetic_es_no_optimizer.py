"""Train a small MLP classifier with evolution strategies instead of backprop.

Antithetic ES with rank-based fitness shaping, after Sam Greydanus' "evostrats" benchmark:
the fitness is the negative cross-entropy of a perturbed copy of the weights, the gradient
is estimated from a population of perturbations, and the weights are moved with plain SGD
on the flat parameter vector. Every few steps we compare the ES estimate with the true
backprop gradient (cosine angle) and then throw the true gradient away.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

args = dict(popsize=100, sigma=1e-2, beta=50., learn_rate=2e-1, lr_anneal_coeff=0.75,
            total_steps=240, batch_size=100, test_every=40, seed=0)


def make_blobs(n, n_classes=4, dim=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes, dim, generator=torch.Generator().manual_seed(123)) * 1.2
    y = torch.randint(0, n_classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, dim, generator=g) * 1.5
    return x, y


x_train, y_train = make_blobs(3000, seed=1)
x_test, y_test = make_blobs(1000, seed=2)
trainloader = DataLoader(TensorDataset(x_train, y_train), batch_size=args['batch_size'], shuffle=True)


class MLP(nn.Module):
    def __init__(self, input_size=20, hidden_size=32, output_size=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_size, hidden_size), nn.Tanh(),
                                 nn.Linear(hidden_size, output_size))

    def forward(self, x):
        return self.net(x)


def get_params(model):
    return parameters_to_vector(model.parameters()).detach().clone()


def set_params(model, vec):
    vector_to_parameters(vec, model.parameters())


def get_grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def clear_grads(model):
    for p in model.parameters():
        p.grad = None


def fitness_fn_getter(inputs, targets):
    criterion = nn.CrossEntropyLoss()

    def fitness_fn(model):
        return -criterion(model(inputs), targets)
    return fitness_fn


class Evostrat:
    def __init__(self, num_params, popsize=100, sigma=1e-2, beta=50.):
        self.num_params = num_params
        self.popsize = popsize
        self.sigma = sigma
        self.beta = beta

    def sample(self):
        eps = torch.randn(self.popsize // 2, self.num_params)
        eps = torch.cat([eps, -eps], dim=0)
        return self.sigma * eps

    @torch.no_grad()
    def eval_population(self, model, fitness_fn):
        params = get_params(model)
        epsilons, fitness = self.sample(), np.zeros(self.popsize)
        for i in range(self.popsize):
            set_params(model, params + epsilons[i])
            fitness[i] = fitness_fn(model).item()
        set_params(model, params)
        return fitness, epsilons

    def fitness_shaping(self, fitness):
        ranks = np.empty_like(fitness)
        ranks[np.argsort(fitness)] = np.linspace(-.5, 0.5, len(fitness))
        return ranks

    def estimate_grad(self, fitness, epsilons):
        half = self.popsize // 2
        diffs = .5 * (fitness[:half] - fitness[half:])
        diffs = self.beta * torch.tensor(diffs, dtype=torch.float32).reshape(-1, 1)
        return (diffs * epsilons[:half]).mean(0)

    def step(self, model, fitness_fn):
        fitness, epsilons = self.eval_population(model, fitness_fn)
        with torch.no_grad():
            current_fitness = fitness_fn(model).item()
        fitness = self.fitness_shaping(fitness)
        return current_fitness, self.estimate_grad(fitness, epsilons)


class Backprop:
    def step(self, model, fitness_fn):
        fitness = fitness_fn(model)
        fitness.backward()
        grad = get_grads(model)
        clear_grads(model)
        return fitness.item(), grad


def angle_between(a, b):
    cos = torch.dot(a, b) / (a.norm() * b.norm() + 1e-12)
    return torch.rad2deg(torch.acos(cos.clamp(-1, 1))).item()


@torch.no_grad()
def evaluate(model):
    logits = model(x_test)
    loss = nn.functional.cross_entropy(logits, y_test).item()
    acc = (logits.argmax(-1) == y_test).float().mean().item() * 100
    return loss, acc


model = MLP()
num_params = sum(p.numel() for p in model.parameters())
grad_estimator = Evostrat(num_params, args['popsize'], args['sigma'], args['beta'])
print(f"model has {num_params} parameters, popsize {args['popsize']}")
test_loss, test_acc = evaluate(model)
print(f"init: test loss {test_loss:.3f}, test acc {test_acc:.1f}")

learn_rate = args['learn_rate']
train_iter = iter(trainloader)
for step in range(args['total_steps']):
    try:
        inputs, targets = next(train_iter)
    except StopIteration:
        train_iter = iter(trainloader)
        inputs, targets = next(train_iter)

    fitness_fn = fitness_fn_getter(inputs, targets)
    fitness, grad_est = grad_estimator.step(model, fitness_fn)
    loss = -fitness

    new_params = get_params(model) + learn_rate * grad_est
    set_params(model, new_params)

    if step % 100 == 0 and step > 0:
        learn_rate *= args['lr_anneal_coeff']

    if step % args['test_every'] == 0 or step == args['total_steps'] - 1:
        test_loss, test_acc = evaluate(model)
        _, grad_est = grad_estimator.step(model, fitness_fn)
        _, grad_true = Backprop().step(model, fitness_fn)
        angle = angle_between(grad_est, grad_true)
        print(f"step {step:4d}, train {loss:.3f}, test {test_loss:.3f}, acc {test_acc:.1f}, "
              f"angle {angle:.1f} deg, lr {learn_rate:.3f}")
