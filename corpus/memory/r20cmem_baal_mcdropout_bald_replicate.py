"""Bayesian active learning (BALD with MC-Dropout) on 28x28 greyscale glyph images.

Follows BaaL's workflow: a ModelWrapper trains the classifier on the labelled part of an
ActiveLearningDataset, then predicts the unlabelled pool with dropout kept on, several stochastic
forward passes per image (20 MC samples, as in BaaL's MC-Dropout examples), and the BALD
heuristic picks the most informative pool images to be labelled next, a hundred per step.
The glyphs are synthetic: ten stroke templates, jittered and noised.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset

torch.manual_seed(0)
np.random.seed(0)

NUM_CLASSES = 10
INITIAL_LABELLED = 100
QUERY_SIZE = 100
AL_STEPS = 3
EPOCHS_PER_STEP = 8
ITERATIONS = 20
BATCH_SIZE = 32
PREDICT_BATCH_SIZE = 256


# ---------------------------------------------------------------- data
def make_glyphs(n, seed):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    trng = np.random.RandomState(123)
    templates = []
    for _ in range(NUM_CLASSES):
        img = np.zeros((28, 28), dtype=np.float32)
        pts = trng.uniform(6, 22, size=(4, 2))
        for (y0, x0), (y1, x1) in zip(pts[:-1], pts[1:]):
            for t in np.linspace(0, 1, 20):
                cy, cx = y0 + t * (y1 - y0), x0 + t * (x1 - x0)
                img = np.maximum(img, np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 3.0))
        templates.append(img)
    labels = rng.randint(0, NUM_CLASSES, size=n)
    images = np.zeros((n, 1, 28, 28), dtype=np.float32)
    for i, c in enumerate(labels):
        dy, dx = rng.randint(-3, 4, size=2)
        img = np.roll(np.roll(templates[c], dy, 0), dx, 1)
        images[i, 0] = np.clip(img + 0.3 * rng.randn(28, 28), 0, 1)
    return torch.from_numpy(images), torch.from_numpy(labels).long()


class GlyphDataset(Dataset):
    def __init__(self, n, seed):
        self.x, self.y = make_glyphs(n, seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class ActiveLearningDataset:
    def __init__(self, dataset):
        self._dataset = dataset
        self.labelled = np.zeros(len(dataset), dtype=bool)

    def label_randomly(self, n):
        idx = np.random.choice(np.where(~self.labelled)[0], n, replace=False)
        self.labelled[idx] = True

    def label(self, pool_indices):
        pool_idx = np.where(~self.labelled)[0]
        self.labelled[pool_idx[pool_indices]] = True

    @property
    def train_set(self):
        return Subset(self._dataset, np.where(self.labelled)[0].tolist())

    @property
    def pool(self):
        return Subset(self._dataset, np.where(~self.labelled)[0].tolist())

    def __len__(self):
        return int(self.labelled.sum())


# ---------------------------------------------------------------- model
class MCDropoutCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.dropout2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, NUM_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(x).flatten(1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return self.fc2(x)


def stack_in_memory(data, iterations):
    """Replicate the batch `iterations` times along the batch dimension."""
    input_shape = data.size()
    batch_size = input_shape[0]
    data = torch.stack([data] * iterations)
    return data.view(batch_size * iterations, *input_shape[1:])


class ModelWrapper:
    def __init__(self, model, criterion, replicate_in_memory=True):
        self.model = model
        self.criterion = criterion
        self.replicate_in_memory = replicate_in_memory

    def train_on_dataset(self, dataset, optimizer, batch_size, epoch):
        self.model.train()
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
        for _ in range(epoch):
            total, n = 0.0, 0
            for data, target in loader:
                optimizer.zero_grad()
                loss = self.criterion(self.model(data), target)
                loss.backward()
                optimizer.step()
                total += loss.item() * len(target)
                n += len(target)
        return total / n

    def test_on_dataset(self, dataset, batch_size):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in DataLoader(dataset, batch_size=batch_size):
                correct += (self.model(data).argmax(1) == target).sum().item()
        return correct / len(dataset)

    def predict_on_batch(self, data, iterations=1):
        with torch.no_grad():
            if self.replicate_in_memory:
                input_shape = data.size()
                batch_size = input_shape[0]
                data = stack_in_memory(data, iterations)
                out = self.model(data)
                out = out.view(iterations, batch_size, *out.size()[1:])
                out = out.permute(1, 2, 0)
            else:
                out = torch.stack([self.model(data) for _ in range(iterations)], dim=-1)
            return out

    def predict_on_dataset(self, dataset, batch_size, iterations):
        self.model.train()
        preds = []
        for data, _ in DataLoader(dataset, batch_size=batch_size):
            preds.append(F.softmax(self.predict_on_batch(data, iterations=iterations), dim=1))
        return torch.cat(preds).numpy()


def bald(probs):
    """probs: [n_sample, n_class, n_iterations] -> indices, most informative first."""
    expected_entropy = -np.mean(np.sum(probs * np.log(probs + 1e-10), axis=1), axis=-1)
    expected_p = np.mean(probs, axis=-1)
    entropy_expected_p = -np.sum(expected_p * np.log(expected_p + 1e-10), axis=1)
    return np.argsort(-(entropy_expected_p - expected_entropy))


full_train = GlyphDataset(600, seed=1)
test_set = GlyphDataset(400, seed=2)
active_set = ActiveLearningDataset(full_train)
active_set.label_randomly(INITIAL_LABELLED)

model = MCDropoutCNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
wrapper = ModelWrapper(model, nn.CrossEntropyLoss())

t0 = time.time()
for step in range(AL_STEPS):
    train_loss = wrapper.train_on_dataset(active_set.train_set, optimizer, BATCH_SIZE, EPOCHS_PER_STEP)
    test_acc = wrapper.test_on_dataset(test_set, BATCH_SIZE)
    print("AL step {}: labelled {}  pool {}  train loss {:.4f}  test acc {:.3f}  ({:.1f}s)".format(
        step, len(active_set), len(active_set.pool), train_loss, test_acc, time.time() - t0))
    probs = wrapper.predict_on_dataset(active_set.pool, PREDICT_BATCH_SIZE, iterations=ITERATIONS)
    ranks = bald(probs)
    active_set.label(ranks[:QUERY_SIZE])
    print("  queried {} pool images by BALD (predictions {})".format(QUERY_SIZE, probs.shape))
