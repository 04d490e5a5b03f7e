"""Multi-task molecular property prediction with a GIN, following the OGB ogbg-mol example
(examples/graphproppred/mol/main_pyg.py): the label matrix has NaN where an assay was not measured,
and the BCE loss is taken only over the measured entries (is_valid = y == y). Evaluation is the
mean ROC-AUC over tasks, each task scored on its labelled molecules only.

Plain PyTorch message passing (index_add_) on synthetic molecule-like graphs, no PyG needed.
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

NUM_ATOM_TYPES = 6
TASK_PAIRS = [(0, 1), (1, 2), (2, 3), (0, 4), (3, 5), (4, 5)]
MISSING_RATE = 0.4


def make_molecule(g):
    n = torch.randint(8, 16, (1,), generator=g).item()
    x = torch.multinomial(torch.tensor([0.3, 0.2, 0.15, 0.15, 0.1, 0.1]), n, replacement=True, generator=g)
    src, dst = [], []
    for i in range(1, n):
        j = torch.randint(0, i, (1,), generator=g).item()
        src += [i, j]
        dst += [j, i]
    for _ in range(n // 4):
        i, j = torch.randint(0, n, (2,), generator=g).tolist()
        if i != j:
            src += [i, j]
            dst += [j, i]
    edge_index = torch.tensor([src, dst], dtype=torch.long)
    types = x[edge_index]
    y = torch.zeros(len(TASK_PAIRS))
    for t, (a, b) in enumerate(TASK_PAIRS):
        y[t] = float(((types[0] == a) & (types[1] == b)).any())
    missing = torch.rand(len(TASK_PAIRS), generator=g) < MISSING_RATE
    y[missing] = float("nan")
    return x, edge_index, y


class MolDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.graphs = [make_molecule(g) for _ in range(n)]
        self.num_tasks = len(TASK_PAIRS)
        self.task_type = "binary classification"

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, idx):
        return self.graphs[idx]


class Batch:
    def __init__(self, x, edge_index, y, batch, num_graphs):
        self.x, self.edge_index, self.y, self.batch, self.num_graphs = x, edge_index, y, batch, num_graphs


def collate(graphs):
    xs, eis, ys, bs = [], [], [], []
    offset = 0
    for i, (x, ei, y) in enumerate(graphs):
        xs.append(x)
        eis.append(ei + offset)
        ys.append(y)
        bs.append(torch.full((x.shape[0],), i, dtype=torch.long))
        offset += x.shape[0]
    return Batch(torch.cat(xs), torch.cat(eis, 1), torch.stack(ys), torch.cat(bs), len(graphs))


class GINConv(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(emb_dim, 2 * emb_dim), nn.BatchNorm1d(2 * emb_dim), nn.ReLU(),
                                 nn.Linear(2 * emb_dim, emb_dim))
        self.eps = nn.Parameter(torch.zeros(1))

    def forward(self, h, edge_index):
        agg = torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]])
        return self.mlp((1 + self.eps) * h + agg)


class GNN(nn.Module):
    def __init__(self, num_tasks, num_layer=3, emb_dim=64, drop_ratio=0.1):
        super().__init__()
        self.atom_encoder = nn.Embedding(NUM_ATOM_TYPES, emb_dim)
        self.convs = nn.ModuleList([GINConv(emb_dim) for _ in range(num_layer)])
        self.batch_norms = nn.ModuleList([nn.BatchNorm1d(emb_dim) for _ in range(num_layer)])
        self.drop = nn.Dropout(drop_ratio)
        self.num_layer = num_layer
        self.graph_pred_linear = nn.Linear(emb_dim, num_tasks)

    def forward(self, batched_data):
        h = self.atom_encoder(batched_data.x)
        for layer in range(self.num_layer):
            h = self.batch_norms[layer](self.convs[layer](h, batched_data.edge_index))
            if layer < self.num_layer - 1:
                h = torch.relu(h)
            h = self.drop(h)
        pooled = torch.zeros(batched_data.num_graphs, h.shape[1]).index_add_(0, batched_data.batch, h)
        counts = torch.bincount(batched_data.batch, minlength=batched_data.num_graphs).clamp(min=1)
        return self.graph_pred_linear(pooled / counts.unsqueeze(1))


def roc_auc(y_true, y_score):
    order = torch.argsort(y_score)
    ranks = torch.empty_like(y_score)
    ranks[order] = torch.arange(1, len(y_score) + 1, dtype=y_score.dtype)
    pos = y_true == 1
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def evaluator_eval(y_true, y_pred):
    rocauc_list = []
    for i in range(y_true.shape[1]):
        is_labeled = y_true[:, i] == y_true[:, i]
        if (y_true[is_labeled, i] == 1).any() and (y_true[is_labeled, i] == 0).any():
            rocauc_list.append(roc_auc(y_true[is_labeled, i], y_pred[is_labeled, i]))
    return {"rocauc": sum(rocauc_list) / len(rocauc_list)}


cls_criterion = torch.nn.BCEWithLogitsLoss()
reg_criterion = torch.nn.MSELoss()


def train(model, loader, optimizer, task_type):
    model.train()
    total, steps = 0.0, 0
    for step, batch in enumerate(loader):
        if batch.x.shape[0] == 1 or batch.batch[-1] == 0:
            pass
        else:
            pred = model(batch)
            optimizer.zero_grad()
            is_valid = batch.y == batch.y
            if "classification" in task_type:
                loss = cls_criterion(pred.to(torch.float32)[is_valid], batch.y.to(torch.float32)[is_valid])
            else:
                loss = reg_criterion(pred.to(torch.float32)[is_valid], batch.y.to(torch.float32)[is_valid])
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
    return total / max(steps, 1)


def eval(model, loader):
    model.eval()
    y_true, y_pred = [], []
    for batch in loader:
        with torch.no_grad():
            pred = model(batch)
        y_true.append(batch.y.view(pred.shape))
        y_pred.append(pred)
    return evaluator_eval(torch.cat(y_true), torch.cat(y_pred))


def main():
    torch.set_num_threads(1)
    dataset = MolDataset(640, seed=1)
    train_set = torch.utils.data.Subset(dataset, range(0, 480))
    valid_set = torch.utils.data.Subset(dataset, range(480, 640))
    print(f"train labels measured: {(~torch.isnan(torch.stack([g[2] for g in train_set]))).float().mean():.2f}")
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate)
    valid_loader = DataLoader(valid_set, batch_size=32, shuffle=False, collate_fn=collate)

    model = GNN(num_tasks=dataset.num_tasks)
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    print(f"epoch 0  valid rocauc {eval(model, valid_loader)['rocauc']:.3f}")
    for epoch in range(1, 9):
        loss = train(model, train_loader, optimizer, dataset.task_type)
        train_perf = eval(model, train_loader)
        valid_perf = eval(model, valid_loader)
        print(f"epoch {epoch}  train loss {loss:.4f}  train rocauc {train_perf['rocauc']:.3f}  "
              f"valid rocauc {valid_perf['rocauc']:.3f}")


if __name__ == "__main__":
    main()
