"""Tabular classifier on a heavily imbalanced data set (90% / 8% / 2%), trained with an
ImbalancedDatasetSampler (ufoym/imbalanced-dataset-sampler): each sample is drawn with weight
1 / (count of its class), with replacement, so every batch is roughly class-balanced."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader, Sampler

torch.manual_seed(0)


class ImbalancedDatasetSampler(Sampler):
    def __init__(self, dataset, indices=None, num_samples=None, callback_get_label=None):
        self.indices = list(range(len(dataset))) if indices is None else indices
        self.callback_get_label = callback_get_label
        self.num_samples = len(self.indices) if num_samples is None else num_samples
        labels = self._get_labels(dataset)
        label_to_count = torch.bincount(labels[self.indices])
        weights = 1.0 / label_to_count[labels[self.indices]].double()
        self.weights = weights

    def _get_labels(self, dataset):
        if self.callback_get_label:
            return self.callback_get_label(dataset)
        return dataset.get_labels()

    def __iter__(self):
        return (self.indices[i] for i in torch.multinomial(self.weights, self.num_samples, replacement=True))

    def __len__(self):
        return self.num_samples


class Transactions(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        u = torch.rand(n, generator=g)
        self.y = torch.where(u < 0.90, 0, torch.where(u < 0.98, 1, 2))
        centers = torch.tensor([[0.0] * 10, [1.2] * 5 + [0.0] * 5, [0.0] * 5 + [1.2] * 5])
        self.x = centers[self.y] + torch.randn(n, 10, generator=g)

    def get_labels(self):
        return self.y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))

    def forward(self, x):
        return self.layers(x)


def per_class_recall(model, loader):
    model.eval()
    hits, counts = torch.zeros(3), torch.zeros(3)
    with torch.no_grad():
        for x, y in loader:
            pred = model(x).argmax(1)
            for c in range(3):
                counts[c] += (y == c).sum()
                hits[c] += ((pred == c) & (y == c)).sum()
    model.train()
    return hits / counts


def main():
    train_set = Transactions(4000, 1)
    test_set = Transactions(4000, 2)
    train_loader = DataLoader(train_set, batch_size=64, sampler=ImbalancedDatasetSampler(train_set))
    test_loader = DataLoader(test_set, batch_size=500)
    print("train class counts:", torch.bincount(train_set.y).tolist())
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    r = per_class_recall(model, test_loader)
    print(f"epoch 0 test recall {[round(v, 3) for v in r.tolist()]} balanced acc {r.mean():.3f}")
    for epoch in range(1, 6):
        seen = torch.zeros(3)
        total, correct, running = 0, 0, 0.0
        for x, y in train_loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            running += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
            seen += torch.bincount(y, minlength=3)
        r = per_class_recall(model, test_loader)
        print(f"epoch {epoch} loss {running / total:.4f} train acc {correct / total:.3f} "
              f"drawn per class {seen.int().tolist()} test recall {[round(v, 3) for v in r.tolist()]} "
              f"balanced acc {r.mean():.3f}")


if __name__ == "__main__":
    main()
