"""Scalable neighbourhood component analysis (NCA) with a memory bank.

An embedding network is trained so that every sample's nearest neighbours in embedding space
share its class. The embeddings of all training samples are kept in a memory bank (updated with
momentum); each batch is compared against the whole bank and the NCA loss maximises the
probability mass of same-class neighbours.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(2)

NUM_CLASSES = 20
NUM_TRAIN = 20000
EMBED_DIM = 64


class ClusteredFeatures(Dataset):
    def __init__(self, n, dim=48, num_classes=NUM_CLASSES):
        centers = 3.0 * torch.randn(num_classes, dim)
        self.labels = torch.randint(0, num_classes, (n,))
        x = centers[self.labels] + 2.5 * torch.randn(n, dim)
        self.features = torch.tanh(x @ torch.randn(dim, dim) / dim ** 0.5)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.features[i], self.labels[i], i


class EmbeddingNet(nn.Module):
    def __init__(self, in_dim=48, hidden=256, out_dim=EMBED_DIM):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_dim))

    def forward(self, x):
        return F.normalize(self.net(x), dim=1)


def expanded_pairwise_distances(x, y=None):
    """dist[i, j] = ||x[i, :] - y[j, :]||^2"""
    if y is not None:
        differences = x.unsqueeze(1) - y.unsqueeze(0)
    else:
        differences = x.unsqueeze(1) - x.unsqueeze(0)
    distances = torch.sum(differences * differences, -1)
    return distances


class NCALoss(nn.Module):
    def __init__(self, bank_labels, temperature=0.05):
        super().__init__()
        self.bank_labels = bank_labels
        self.temperature = temperature

    def forward(self, embeddings, labels, indexes, memory_bank):
        dist = expanded_pairwise_distances(embeddings, memory_bank)
        logits = -dist / self.temperature
        logits[torch.arange(len(indexes)), indexes] = float("-inf")
        same = labels.unsqueeze(1) == self.bank_labels.unsqueeze(0)
        log_prob = logits.log_softmax(dim=1)
        loss = -torch.logsumexp(log_prob.masked_fill(~same, float("-inf")), dim=1)
        return loss.mean()


def knn_accuracy(memory_bank, bank_labels, queries, query_labels, k=5):
    with torch.no_grad():
        sims = queries @ memory_bank.T
        idx = sims.topk(k, dim=1).indices
        votes = bank_labels[idx].mode(dim=1).values
        return (votes == query_labels).float().mean().item()


if __name__ == "__main__":
    train_set = ClusteredFeatures(NUM_TRAIN)
    loader = DataLoader(train_set, batch_size=128, shuffle=True)
    model = EmbeddingNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    with torch.no_grad():
        memory_bank = model(train_set.features)
    criterion = NCALoss(train_set.labels)
    momentum = 0.5

    for epoch in range(2):
        model.train()
        for step, (x, y, idx) in enumerate(loader):
            emb = model(x)
            loss = criterion(emb, y, idx, memory_bank)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                memory_bank[idx] = F.normalize(momentum * memory_bank[idx] + (1 - momentum) * emb, dim=1)
            if step % 20 == 0:
                print(f"epoch {epoch} step {step}/{len(loader)} nca loss {loss.item():.4f}")
        acc = knn_accuracy(memory_bank, train_set.labels, memory_bank[:2000], train_set.labels[:2000])
        print(f"epoch {epoch}: 5-NN accuracy on the bank {acc:.3f}")
