"""DLRM click-through-rate model on Criteo-style display-ads logs (13 integer
features, 26 hashed categorical features, a click label), trained with accelerate.
The logs are converted to numpy arrays first, as torchrec's criteo preprocessing does,
and then loaded in memory.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset

INT_FEATURE_COUNT = 13
CAT_FEATURE_COUNT = 26
NUM_EMBEDDINGS = 2000


def write_fake_day(path, n_rows, seed=0):
    rng = np.random.default_rng(seed)
    w_dense = rng.normal(0, 0.4, INT_FEATURE_COUNT)
    with open(path, "w") as f:
        for _ in range(n_rows):
            dense = rng.poisson(rng.uniform(0.5, 40, INT_FEATURE_COUNT)).astype(int)
            dense[1] = rng.integers(-3, 2) if rng.random() < 0.01 else dense[1]
            missing = rng.random(INT_FEATURE_COUNT) < 0.2
            cats = rng.zipf(1.3, CAT_FEATURE_COUNT) % 50000
            logit = float(np.log1p(np.maximum(dense, 0)) @ w_dense) - 2.0 + 0.8 * float(cats[0] % 3 == 0)
            label = int(rng.random() < 1 / (1 + np.exp(-logit)))
            dense_str = ["" if m else str(v) for v, m in zip(dense, missing)]
            cat_str = ["%08x" % c for c in cats]
            f.write("\t".join([str(label)] + dense_str + cat_str) + "\n")


def tsv_to_npys(in_file, out_dense_file, out_sparse_file, out_labels_file):
    dense, sparse, labels = [], [], []
    with open(in_file) as f:
        for line in f:
            row = line.rstrip("\n").split("\t")
            labels.append(int(row[0]))
            dense.append([int(v) if v else 0 for v in row[1:1 + INT_FEATURE_COUNT]])
            sparse.append([int(v, 16) if v else 0 for v in row[1 + INT_FEATURE_COUNT:]])

    dense_np = np.array(dense, dtype=np.int32)
    sparse_np = np.array(sparse, dtype=np.int32)
    labels_np = np.array(labels, dtype=np.int32)

    dense_np += 3
    dense_np = np.log(dense_np, dtype=np.float32)

    labels_np = labels_np.reshape((-1, 1))
    np.save(out_dense_file, dense_np)
    np.save(out_sparse_file, sparse_np)
    np.save(out_labels_file, labels_np)


class InMemoryCriteo(Dataset):
    def __init__(self, dense_file, sparse_file, labels_file):
        self.dense = torch.from_numpy(np.load(dense_file))
        self.sparse = torch.from_numpy(np.load(sparse_file)).long() % NUM_EMBEDDINGS
        self.labels = torch.from_numpy(np.load(labels_file)).float()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {"dense_features": self.dense[idx], "sparse_features": self.sparse[idx], "labels": self.labels[idx]}


def mlp(sizes, sigmoid_last=False):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or not sigmoid_last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, embedding_dim, dense_arch_layer_sizes, over_arch_layer_sizes):
        super().__init__()
        self.embedding_bags = nn.ModuleList(
            [nn.EmbeddingBag(NUM_EMBEDDINGS, embedding_dim, mode="sum") for _ in range(CAT_FEATURE_COUNT)])
        self.dense_arch = mlp([INT_FEATURE_COUNT] + dense_arch_layer_sizes)
        n_f = CAT_FEATURE_COUNT + 1
        self.over_arch = mlp([embedding_dim + n_f * (n_f - 1) // 2] + over_arch_layer_sizes, sigmoid_last=True)
        self.triu = torch.triu_indices(n_f, n_f, offset=1)

    def forward(self, dense_features, sparse_features):
        d = self.dense_arch(dense_features)
        embs = [bag(sparse_features[:, i:i + 1]) for i, bag in enumerate(self.embedding_bags)]
        combined = torch.stack([d] + embs, dim=1)
        inter = torch.bmm(combined, combined.transpose(1, 2))[:, self.triu[0], self.triu[1]]
        return self.over_arch(torch.cat([d, inter], dim=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_rows", type=int, default=6000)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--embedding_dim", type=int, default=16)
    args = parser.parse_args()

    set_seed(0)
    accelerator = Accelerator(cpu=True)
    workdir = tempfile.mkdtemp(prefix="criteo_")
    tsv = os.path.join(workdir, "day_0.tsv")
    write_fake_day(tsv, args.num_rows, seed=1)
    files = [os.path.join(workdir, n) for n in ("day_0_dense.npy", "day_0_sparse.npy", "day_0_labels.npy")]
    tsv_to_npys(tsv, *files)

    dataset = InMemoryCriteo(*files)
    n_val = len(dataset) // 10
    train_set, val_set = torch.utils.data.random_split(dataset, [len(dataset) - n_val, n_val])
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=1024)

    model = DLRM(args.embedding_dim, [64, 32, args.embedding_dim], [64, 32, 1])
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    loss_fn = nn.BCEWithLogitsLoss()
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for batch in train_loader:
            logits = model(batch["dense_features"], batch["sparse_features"])
            loss = loss_fn(logits, batch["labels"])
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            step += 1
            if step % 10 == 0:
                accelerator.print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        model.eval()
        correct, total, val_loss = 0, 0, 0.0
        with torch.no_grad():
            for batch in val_loader:
                logits = model(batch["dense_features"], batch["sparse_features"])
                val_loss += loss_fn(logits, batch["labels"]).item() * len(logits)
                correct += ((logits > 0).float() == batch["labels"]).sum().item()
                total += len(logits)
        accelerator.print(f"epoch {epoch} val_loss {val_loss / total:.4f} val_acc {correct / total:.3f}")


if __name__ == "__main__":
    main()
