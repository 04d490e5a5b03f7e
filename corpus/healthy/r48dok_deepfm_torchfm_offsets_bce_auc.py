"""DeepFM click-through-rate model in the style of rixwew/pytorch-fm (torchfm):
FeaturesLinear + FactorizationMachine + MultiLayerPerceptron over shared field embeddings,
trained with BCELoss on a synthetic Criteo-like table of categorical fields."""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split


class SyntheticCTRDataset(Dataset):
    def __init__(self, n=12000, field_dims=(12, 20, 8, 30, 6, 15, 10, 25), seed=0):
        rng = np.random.RandomState(seed)
        self.field_dims = np.array(field_dims, dtype=np.int64)
        self.items = np.stack([rng.randint(0, d, size=n) for d in field_dims], axis=1)
        # hidden click model: per-value biases plus pairwise latent interactions
        bias = [rng.normal(0, 0.6, d) for d in field_dims]
        lat = [rng.normal(0, 0.5, (d, 4)) for d in field_dims]
        logit = np.full(n, -0.8)
        vecs = []
        for f, d in enumerate(field_dims):
            logit += bias[f][self.items[:, f]]
            vecs.append(lat[f][self.items[:, f]])
        vecs = np.stack(vecs, axis=1)
        s = vecs.sum(1)
        logit += 0.5 * ((s ** 2).sum(1) - (vecs ** 2).sum(axis=(1, 2)))
        p = 1.0 / (1.0 + np.exp(-logit))
        self.targets = (rng.rand(n) < p).astype(np.float32)

    def __len__(self):
        return self.targets.shape[0]

    def __getitem__(self, index):
        return self.items[index], self.targets[index]


class FeaturesLinear(nn.Module):
    def __init__(self, field_dims, output_dim=1):
        super().__init__()
        self.fc = nn.Embedding(sum(field_dims), output_dim)
        self.bias = nn.Parameter(torch.zeros((output_dim,)))
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return torch.sum(self.fc(x), dim=1) + self.bias


class FeaturesEmbedding(nn.Module):
    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = nn.Embedding(sum(field_dims), embed_dim)
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
        nn.init.xavier_uniform_(self.embedding.weight.data)

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return self.embedding(x)


class FactorizationMachine(nn.Module):
    def __init__(self, reduce_sum=True):
        super().__init__()
        self.reduce_sum = reduce_sum

    def forward(self, x):
        square_of_sum = torch.sum(x, dim=1) ** 2
        sum_of_square = torch.sum(x ** 2, dim=1)
        ix = square_of_sum - sum_of_square
        if self.reduce_sum:
            ix = torch.sum(ix, dim=1, keepdim=True)
        return 0.5 * ix


class MultiLayerPerceptron(nn.Module):
    def __init__(self, input_dim, embed_dims, dropout, output_layer=True):
        super().__init__()
        layers = []
        for embed_dim in embed_dims:
            layers.append(nn.Linear(input_dim, embed_dim))
            layers.append(nn.BatchNorm1d(embed_dim))
            layers.append(nn.ReLU())
            layers.append(nn.Dropout(p=dropout))
            input_dim = embed_dim
        if output_layer:
            layers.append(nn.Linear(input_dim, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x)


class DeepFactorizationMachineModel(nn.Module):
    def __init__(self, field_dims, embed_dim, mlp_dims, dropout):
        super().__init__()
        self.linear = FeaturesLinear(field_dims)
        self.fm = FactorizationMachine(reduce_sum=True)
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout)

    def forward(self, x):
        embed_x = self.embedding(x)
        x = self.linear(x) + self.fm(embed_x) + self.mlp(embed_x.view(-1, self.embed_output_dim))
        return torch.sigmoid(x.squeeze(1))


def roc_auc(targets, scores):
    targets = np.asarray(targets)
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    n_pos = targets.sum()
    n_neg = len(targets) - n_pos
    return (ranks[targets == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def train(model, optimizer, data_loader, criterion, log_interval=12):
    model.train()
    total_loss = 0
    for i, (fields, target) in enumerate(data_loader):
        y = model(fields)
        loss = criterion(y, target.float())
        model.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        if (i + 1) % log_interval == 0:
            print(f"    batch {i + 1:3d}  loss {total_loss / log_interval:.4f}")
            total_loss = 0


def test(model, data_loader):
    model.eval()
    targets, predicts = [], []
    with torch.no_grad():
        for fields, target in data_loader:
            y = model(fields)
            targets.extend(target.tolist())
            predicts.extend(y.tolist())
    return roc_auc(targets, predicts)


def main():
    torch.manual_seed(42)
    dataset = SyntheticCTRDataset()
    train_length = int(len(dataset) * 0.8)
    valid_length = len(dataset) - train_length
    train_dataset, valid_dataset = random_split(
        dataset, (train_length, valid_length), generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_dataset, batch_size=256, shuffle=True)
    valid_loader = DataLoader(valid_dataset, batch_size=1024)

    model = DeepFactorizationMachineModel(dataset.field_dims, embed_dim=16, mlp_dims=(64, 64), dropout=0.2)
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(params=model.parameters(), lr=1e-3, weight_decay=1e-6)

    print(f"positive rate {dataset.targets.mean():.3f}  train {train_length}  valid {valid_length}")
    print(f"epoch 0 validation: auc {test(model, valid_loader):.4f}")
    start = time.time()
    for epoch_i in range(5):
        train(model, optimizer, train_loader, criterion)
        auc = test(model, valid_loader)
        print(f"epoch {epoch_i + 1} validation: auc {auc:.4f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
