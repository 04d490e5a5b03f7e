"""Bayes by Backprop (Blundell et al. 2015) after nitarshan/bayes-by-backprop (Weight Uncertainty in
Neural Networks.ipynb): every weight has a Gaussian posterior (mu, rho) with sigma = log1p(exp(rho)),
weights are sampled anew on every forward, the prior is a scale mixture of two Gaussians, and the loss
is the complexity cost (log q - log prior) divided by the number of batches plus the summed NLL of the
averaged sampled outputs. Synthetic 10-class data in place of MNIST."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)

BATCH_SIZE = 100
TEST_BATCH_SIZE = 500
CLASSES = 10
TRAIN_EPOCHS = 8
SAMPLES = 2
TEST_SAMPLES = 10
N_IN = 32

g = torch.Generator().manual_seed(1)
W_true = torch.randn(N_IN, CLASSES, generator=g)


def make_data(n):
    x = torch.randn(n, N_IN, generator=g)
    y = (x @ W_true + 0.5 * torch.randn(n, CLASSES, generator=g)).argmax(1)
    return x, y


x_train, y_train = make_data(3000)
x_test, y_test = make_data(1000)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=TEST_BATCH_SIZE, shuffle=False)
TRAIN_SIZE = len(train_loader.dataset)
TEST_SIZE = len(test_loader.dataset)
NUM_BATCHES = len(train_loader)


class Gaussian(object):
    def __init__(self, mu, rho):
        super().__init__()
        self.mu = mu
        self.rho = rho
        self.normal = torch.distributions.Normal(0, 1)

    @property
    def sigma(self):
        return torch.log1p(torch.exp(self.rho))

    def sample(self):
        epsilon = self.normal.sample(self.rho.size())
        return self.mu + self.sigma * epsilon

    def log_prob(self, input):
        return (-math.log(math.sqrt(2 * math.pi))
                - torch.log(self.sigma)
                - ((input - self.mu) ** 2) / (2 * self.sigma ** 2)).sum()


class ScaleMixtureGaussian(object):
    def __init__(self, pi, sigma1, sigma2):
        super().__init__()
        self.pi = pi
        self.sigma1 = sigma1
        self.sigma2 = sigma2
        self.gaussian1 = torch.distributions.Normal(0, sigma1)
        self.gaussian2 = torch.distributions.Normal(0, sigma2)

    def log_prob(self, input):
        prob1 = torch.exp(self.gaussian1.log_prob(input))
        prob2 = torch.exp(self.gaussian2.log_prob(input))
        return (torch.log(self.pi * prob1 + (1 - self.pi) * prob2)).sum()


PI = 0.5
SIGMA_1 = torch.FloatTensor([math.exp(-0)])
SIGMA_2 = torch.FloatTensor([math.exp(-6)])


class BayesianLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight_mu = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-0.2, 0.2))
        self.weight_rho = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-5, -4))
        self.weight = Gaussian(self.weight_mu, self.weight_rho)
        self.bias_mu = nn.Parameter(torch.Tensor(out_features).uniform_(-0.2, 0.2))
        self.bias_rho = nn.Parameter(torch.Tensor(out_features).uniform_(-5, -4))
        self.bias = Gaussian(self.bias_mu, self.bias_rho)
        self.weight_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.bias_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.log_prior = 0
        self.log_variational_posterior = 0

    def forward(self, input, sample=False, calculate_log_probs=False):
        if self.training or sample:
            weight = self.weight.sample()
            bias = self.bias.sample()
        else:
            weight = self.weight.mu
            bias = self.bias.mu
        if self.training or calculate_log_probs:
            self.log_prior = self.weight_prior.log_prob(weight) + self.bias_prior.log_prob(bias)
            self.log_variational_posterior = self.weight.log_prob(weight) + self.bias.log_prob(bias)
        else:
            self.log_prior, self.log_variational_posterior = 0, 0
        return F.linear(input, weight, bias)


class BayesianNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = BayesianLinear(N_IN, 200)
        self.l2 = BayesianLinear(200, 200)
        self.l3 = BayesianLinear(200, CLASSES)

    def forward(self, x, sample=False):
        x = F.relu(self.l1(x, sample))
        x = F.relu(self.l2(x, sample))
        x = F.log_softmax(self.l3(x, sample), dim=1)
        return x

    def log_prior(self):
        return self.l1.log_prior + self.l2.log_prior + self.l3.log_prior

    def log_variational_posterior(self):
        return self.l1.log_variational_posterior + self.l2.log_variational_posterior + self.l3.log_variational_posterior

    def sample_elbo(self, input, target, samples=SAMPLES):
        outputs = torch.zeros(samples, input.size(0), CLASSES)
        log_priors = torch.zeros(samples)
        log_variational_posteriors = torch.zeros(samples)
        for i in range(samples):
            outputs[i] = self(input, sample=True)
            log_priors[i] = self.log_prior()
            log_variational_posteriors[i] = self.log_variational_posterior()
        log_prior = log_priors.mean()
        log_variational_posterior = log_variational_posteriors.mean()
        negative_log_likelihood = F.nll_loss(outputs.mean(0), target, reduction='sum')
        loss = (log_variational_posterior - log_prior) / NUM_BATCHES + negative_log_likelihood
        return loss, log_prior, log_variational_posterior, negative_log_likelihood


net = BayesianNetwork()
optimizer = optim.Adam(net.parameters())


def train(epoch):
    net.train()
    totals = torch.zeros(4)
    for batch_idx, (data, target) in enumerate(train_loader):
        net.zero_grad()
        loss, log_prior, log_variational_posterior, negative_log_likelihood = net.sample_elbo(data, target)
        loss.backward()
        optimizer.step()
        totals += torch.tensor([loss.item(), log_prior.item(), log_variational_posterior.item(),
                                negative_log_likelihood.item()])
    totals /= NUM_BATCHES
    print(f"epoch {epoch}  loss {totals[0]:.1f}  log prior {totals[1]:.1f}  "
          f"log var posterior {totals[2]:.1f}  nll/batch {totals[3]:.2f}")


def test_ensemble():
    net.eval()
    correct = 0
    corrects = torch.zeros(TEST_SAMPLES + 1, dtype=torch.long)
    with torch.no_grad():
        for data, target in test_loader:
            outputs = torch.zeros(TEST_SAMPLES + 1, data.size(0), CLASSES)
            for i in range(TEST_SAMPLES):
                outputs[i] = net(data, sample=True)
            outputs[TEST_SAMPLES] = net(data, sample=False)
            output = outputs.mean(0)
            preds = outputs.max(2, keepdim=True)[1]
            pred = output.max(1, keepdim=True)[1]
            corrects += preds.eq(target.view_as(pred)).sum(dim=1).squeeze()
            correct += pred.eq(target.view_as(pred)).sum().item()
    print(f"  posterior mean acc {corrects[-1].item() / TEST_SIZE:.3f}  "
          f"one sample acc {corrects[0].item() / TEST_SIZE:.3f}  ensemble acc {correct / TEST_SIZE:.3f}")


test_ensemble()
for epoch in range(1, TRAIN_EPOCHS + 1):
    train(epoch)
    test_ensemble()
