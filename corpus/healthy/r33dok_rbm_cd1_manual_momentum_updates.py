"""Bernoulli RBM trained with contrastive divergence (CD-k), in the style of
GabrielBianconi/pytorch-rbm (rbm.py + mnist_example.py).

Synthetic data: 8x8 binary images of bars (random rows and columns switched on) with pixel noise.
After training, the hidden probabilities are used as features for a small softmax classifier that
predicts how many bars an image holds.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

BATCH_SIZE = 64
VISIBLE_UNITS = 64
HIDDEN_UNITS = 64
CD_K = 1
EPOCHS = 10


class RBM():

    def __init__(self, num_visible, num_hidden, k, learning_rate=1e-3, momentum_coefficient=0.5, weight_decay=1e-4):
        self.num_visible = num_visible
        self.num_hidden = num_hidden
        self.k = k
        self.learning_rate = learning_rate
        self.momentum_coefficient = momentum_coefficient
        self.weight_decay = weight_decay

        self.weights = torch.randn(num_visible, num_hidden) * 0.1
        self.visible_bias = torch.ones(num_visible) * 0.5
        self.hidden_bias = torch.zeros(num_hidden)

        self.weights_momentum = torch.zeros(num_visible, num_hidden)
        self.visible_bias_momentum = torch.zeros(num_visible)
        self.hidden_bias_momentum = torch.zeros(num_hidden)

    def sample_hidden(self, visible_probabilities):
        hidden_activations = torch.matmul(visible_probabilities, self.weights) + self.hidden_bias
        hidden_probabilities = self._sigmoid(hidden_activations)
        return hidden_probabilities

    def sample_visible(self, hidden_probabilities):
        visible_activations = torch.matmul(hidden_probabilities, self.weights.t()) + self.visible_bias
        visible_probabilities = self._sigmoid(visible_activations)
        return visible_probabilities

    def contrastive_divergence(self, input_data):
        positive_hidden_probabilities = self.sample_hidden(input_data)

        random_probabilities = torch.rand(self.num_hidden)

        positive_hidden_activations = (positive_hidden_probabilities >= random_probabilities)

        positive_associations = torch.matmul(input_data.t(), positive_hidden_probabilities)

        negative_hidden_probabilities = positive_hidden_probabilities

        for step in range(self.k):
            negative_visible_probabilities = self.sample_visible(negative_hidden_probabilities)
            negative_hidden_probabilities = self.sample_hidden(negative_visible_probabilities)

        negative_associations = torch.matmul(negative_visible_probabilities.t(), negative_hidden_probabilities)

        self.weights_momentum *= self.momentum_coefficient
        self.weights_momentum += (positive_associations - negative_associations)

        self.visible_bias_momentum *= self.momentum_coefficient
        self.visible_bias_momentum += torch.sum(input_data - negative_visible_probabilities, dim=0)

        self.hidden_bias_momentum *= self.momentum_coefficient
        self.hidden_bias_momentum += torch.sum(positive_hidden_probabilities - negative_hidden_probabilities, dim=0)

        batch_size = input_data.size(0)

        self.weights += self.weights_momentum * self.learning_rate / batch_size
        self.visible_bias += self.visible_bias_momentum * self.learning_rate / batch_size
        self.hidden_bias += self.hidden_bias_momentum * self.learning_rate / batch_size

        self.weights -= self.weights * self.weight_decay

        error = torch.sum((input_data - negative_visible_probabilities)**2)

        return error

    def _sigmoid(self, x):
        return 1 / (1 + torch.exp(-x))


def make_bars(n, g):
    rows = torch.rand(n, 8, 1, generator=g) < 0.15
    cols = torch.rand(n, 1, 8, generator=g) < 0.15
    img = (rows | cols).float()
    flip = torch.rand(n, 8, 8, generator=g) < 0.03
    img = torch.where(flip, 1 - img, img)
    n_bars = (rows.sum((1, 2)) + cols.sum((1, 2))).clamp(max=3)
    return img.view(n, 64), n_bars


g = torch.Generator().manual_seed(1)
train_x, train_y = make_bars(4096, g)
test_x, test_y = make_bars(1024, g)
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=BATCH_SIZE, shuffle=True)


def probe_accuracy(feats_train, feats_test, epochs=150):
    clf = nn.Linear(feats_train.shape[1], 4)
    opt = torch.optim.Adam(clf.parameters(), lr=0.05)
    for _ in range(epochs):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(clf(feats_train), train_y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (clf(feats_test).argmax(1) == test_y).float().mean().item()


print('Training RBM...')

rbm = RBM(VISIBLE_UNITS, HIDDEN_UNITS, CD_K, learning_rate=1e-2)
print('probe accuracy on untrained hidden features: %.3f' % probe_accuracy(
    rbm.sample_hidden(train_x), rbm.sample_hidden(test_x)))

for epoch in range(EPOCHS):
    epoch_error = 0.0

    for batch, _ in train_loader:
        batch_error = rbm.contrastive_divergence(batch)

        epoch_error += batch_error

    print('Epoch Error (epoch=%d): %.4f' % (epoch, epoch_error))

train_features = rbm.sample_hidden(train_x)
test_features = rbm.sample_hidden(test_x)
recon = rbm.sample_visible(rbm.sample_hidden(test_x))
print('test reconstruction error per image: %.3f' % ((test_x - recon) ** 2).sum(1).mean().item())
print('probe accuracy on RBM hidden features: %.3f' % probe_accuracy(train_features, test_features))
print('probe accuracy on raw pixels: %.3f' % probe_accuracy(train_x, test_x))
