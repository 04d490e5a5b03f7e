"""Ordinal regression with CORAL (Cao, Mirjalili & Raschka), as in the coral-pytorch "CORAL MLP for
predicting cement strength" tutorial: an MLP whose output layer is a CoralLayer (one shared weight
vector, num_classes - 1 biases), labels turned into extended binary "levels", the CORAL loss (a sum of
binary cross-entropies over the K - 1 rank tasks), and predictions = number of sigmoid(logit) > 0.5.
Synthetic stand-in for cement_strength: 8 standardised features, 5 ordered strength grades."""
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

random_seed = 1
learning_rate = 0.05
num_epochs = 20
batch_size = 128
NUM_CLASSES = 5

torch.manual_seed(random_seed)
rng = np.random.RandomState(random_seed)

n = 1000
features = rng.randn(n, 8)
latent = features @ np.array([1.2, -0.8, 0.6, 0.0, 0.9, -0.5, 0.3, 0.0]) + 0.6 * np.sin(2 * features[:, 3]) \
    + 0.4 * features[:, 0] * features[:, 7] + 0.5 * rng.randn(n)
cuts = np.quantile(latent, [0.2, 0.4, 0.6, 0.8])
labels = np.searchsorted(cuts, latent)
perm = rng.permutation(n)
X_train, y_train = features[perm[:800]], labels[perm[:800]]
X_test, y_test = features[perm[800:]], labels[perm[800:]]
mu, sd = X_train.mean(0), X_train.std(0)
X_train_std, X_test_std = (X_train - mu) / sd, (X_test - mu) / sd


class MyDataset(Dataset):
    def __init__(self, feature_array, label_array):
        self.features = feature_array.astype(np.float32)
        self.labels = label_array

    def __getitem__(self, index):
        return self.features[index], self.labels[index]

    def __len__(self):
        return self.labels.shape[0]


train_loader = DataLoader(MyDataset(X_train_std, y_train), batch_size=batch_size, shuffle=True)
test_loader = DataLoader(MyDataset(X_test_std, y_test), batch_size=batch_size, shuffle=False)


class CoralLayer(torch.nn.Module):
    def __init__(self, size_in, num_classes, preinit_bias=True):
        super().__init__()
        self.coral_weights = torch.nn.Linear(size_in, 1, bias=False)
        if preinit_bias:
            self.coral_bias = torch.nn.Parameter(torch.arange(num_classes - 1, 0, -1).float() / (num_classes - 1))
        else:
            self.coral_bias = torch.nn.Parameter(torch.zeros(num_classes - 1).float())

    def forward(self, x):
        return self.coral_weights(x) + self.coral_bias


def levels_from_labelbatch(labels, num_classes):
    levels = []
    for label in labels:
        int_label = int(label)
        levels.append(torch.tensor([1] * int_label + [0] * (num_classes - 1 - int_label), dtype=torch.float32))
    return torch.stack(levels)


def coral_loss(logits, levels):
    term1 = F.logsigmoid(logits) * levels + (F.logsigmoid(logits) - logits) * (1 - levels)
    val = -torch.sum(term1, dim=1)
    return torch.mean(val)


def proba_to_label(probas):
    predict_levels = probas > 0.5
    return torch.sum(predict_levels, dim=1)


class MLP(torch.nn.Module):
    def __init__(self, in_features, num_classes, num_hidden_1=300, num_hidden_2=300):
        super().__init__()
        self.my_network = torch.nn.Sequential(
            torch.nn.Linear(in_features, num_hidden_1, bias=False),
            torch.nn.LeakyReLU(),
            torch.nn.Dropout(0.2),
            torch.nn.BatchNorm1d(num_hidden_1),
            torch.nn.Linear(num_hidden_1, num_hidden_2, bias=False),
            torch.nn.LeakyReLU(),
            torch.nn.Dropout(0.2),
            torch.nn.BatchNorm1d(num_hidden_2),
        )
        self.fc = CoralLayer(size_in=num_hidden_2, num_classes=num_classes)

    def forward(self, x):
        x = self.my_network(x)
        logits = self.fc(x)
        probas = torch.sigmoid(logits)
        return logits, probas


model = MLP(in_features=8, num_classes=NUM_CLASSES)
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)


def compute_mae_and_mse(model, data_loader):
    model.eval()
    with torch.no_grad():
        mae, mse, acc, num_examples = 0., 0., 0., 0
        for features, targets in data_loader:
            targets = targets.float()
            logits, probas = model(features)
            predicted_labels = proba_to_label(probas).float()
            num_examples += targets.size(0)
            mae += torch.sum(torch.abs(predicted_labels - targets))
            mse += torch.sum((predicted_labels - targets) ** 2)
            acc += torch.sum(predicted_labels == targets)
    return mae / num_examples, mse / num_examples, acc / num_examples


mae, mse, acc = compute_mae_and_mse(model, test_loader)
print(f'Before training | test MAE {mae:.3f} | test MSE {mse:.3f} | test acc {acc:.3f}')
for epoch in range(num_epochs):
    model = model.train()
    running = 0.0
    for batch_idx, (features, class_labels) in enumerate(train_loader):
        levels = levels_from_labelbatch(class_labels, num_classes=NUM_CLASSES)
        logits, probas = model(features)
        loss = coral_loss(logits, levels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    if epoch % 2 == 1 or epoch == 0:
        train_mae, _, _ = compute_mae_and_mse(model, train_loader)
        mae, mse, acc = compute_mae_and_mse(model, test_loader)
        print(f'Epoch: {epoch + 1:03d}/{num_epochs:03d} | Loss: {running / len(train_loader):.4f} | '
              f'train MAE {train_mae:.3f} | test MAE {mae:.3f} | test MSE {mse:.3f} | test acc {acc:.3f}')
