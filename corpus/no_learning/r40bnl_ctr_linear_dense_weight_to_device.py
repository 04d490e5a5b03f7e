"""Click-through-rate model in the DeepCTR-Torch style: a linear (wide) part over
sparse categorical fields (1-d embeddings) and dense numeric fields, trained with
binary cross-entropy on a table of impressions."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

device = "cpu"
DTYPE = torch.float64

SPARSE_FIELDS = {"user_city": 12, "ad_slot": 6, "weekday": 7, "os": 4}
N_DENSE = 8
TRUE_W = np.random.randn(N_DENSE) * 1.5


class CTRDataset(Dataset):
    def __init__(self, n_rows):
        self.sparse = np.stack([np.random.randint(0, v, size=n_rows) for v in SPARSE_FIELDS.values()], axis=1)
        self.dense = np.random.randn(n_rows, N_DENSE)
        p = 1.0 / (1.0 + np.exp(-(self.dense @ TRUE_W)))
        self.label = (np.random.rand(n_rows) < p).astype(np.float64)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return (torch.from_numpy(self.sparse[i]), torch.from_numpy(self.dense[i]),
                torch.tensor(self.label[i]))


class Linear(nn.Module):
    def __init__(self, sparse_fields, n_dense, init_std=0.0001, device="cpu"):
        super().__init__()
        self.embedding_dict = nn.ModuleDict(
            {name: nn.Embedding(vocab, 1) for name, vocab in sparse_fields.items()})
        for emb in self.embedding_dict.values():
            nn.init.normal_(emb.weight, mean=0, std=init_std)
        if n_dense > 0:
            self.weight = nn.Parameter(torch.Tensor(n_dense, 1)).to(device=device, dtype=DTYPE)
            nn.init.normal_(self.weight, mean=0, std=init_std)

    def forward(self, sparse, dense):
        sparse_logit = sum(emb(sparse[:, k]) for k, emb in enumerate(self.embedding_dict.values()))
        dense_logit = dense.matmul(self.weight)
        return sparse_logit + dense_logit


class WideCTR(nn.Module):
    def __init__(self, sparse_fields, n_dense, device="cpu"):
        super().__init__()
        self.linear_model = Linear(sparse_fields, n_dense, device=device)
        self.bias = nn.Parameter(torch.zeros((1,)))
        self.to(device=device, dtype=DTYPE)

    def forward(self, sparse, dense):
        logit = self.linear_model(sparse, dense) + self.bias
        return torch.sigmoid(logit).squeeze(-1)


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for sparse, dense, y in loader:
            p = model(sparse, dense)
            loss_sum += nn.functional.binary_cross_entropy(p, y, reduction="sum").item()
            correct += ((p > 0.5).double() == y).sum().item()
            total += y.numel()
    return loss_sum / total, correct / total


def main():
    train_ds, val_ds = CTRDataset(4096), CTRDataset(1024)
    train_loader = DataLoader(train_ds, batch_size=256, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=512)

    model = WideCTR(SPARSE_FIELDS, N_DENSE, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_func = nn.BCELoss()

    for epoch in range(10):
        model.train()
        total = 0.0
        for sparse, dense, y in train_loader:
            sparse, dense, y = sparse.to(device), dense.to(device), y.to(device)
            y_pred = model(sparse, dense)
            loss = loss_func(y_pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        val_loss, val_acc = evaluate(model, val_loader)
        print(f"epoch {epoch + 1:2d}  train_logloss {total / len(train_loader):.4f}  "
              f"val_logloss {val_loss:.4f}  val_acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
