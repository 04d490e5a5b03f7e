"""Formation-energy regression on small crystal graphs with a message-passing network
(matsciml-style task: an encoder produces per-graph embeddings, an output head regresses the
target key, MSE between the head's output and the batch's labels).

Each structure is a graph of atoms (species one-hot + a scalar site feature) with bonds given as
an edge list; graphs of a batch are concatenated and pooled per graph through a batch index.
The label of a structure is a sum of per-species contributions plus a bond term.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_SPECIES = 6
HIDDEN = 64
BATCH_SIZE = 32
EPOCHS = 25
LR = 2e-3


class CrystalGraphs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        contrib = torch.tensor([-1.2, -0.4, 0.3, 0.9, 1.5, -2.0])
        self.items = []
        for _ in range(n):
            n_atoms = int(torch.randint(4, 12, (1,), generator=g))
            species = torch.randint(0, N_SPECIES, (n_atoms,), generator=g)
            site = torch.rand(n_atoms, 1, generator=g)
            src = torch.randint(0, n_atoms, (3 * n_atoms,), generator=g)
            dst = torch.randint(0, n_atoms, (3 * n_atoms,), generator=g)
            keep = src != dst
            edge_index = torch.stack([src[keep], dst[keep]])
            energy = (contrib[species] * (1 + site.squeeze(1))).mean() \
                + 0.05 * (contrib[species[edge_index[0]]] * contrib[species[edge_index[1]]]).mean()
            x = torch.cat([F.one_hot(species, N_SPECIES).float(), site], dim=1)
            self.items.append({"x": x, "edge_index": edge_index,
                               "targets": {"energy": torch.tensor([energy.item()])}})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate_graphs(samples):
    xs, edges, batch, offset = [], [], [], 0
    for i, s in enumerate(samples):
        xs.append(s["x"])
        edges.append(s["edge_index"] + offset)
        batch.append(torch.full((s["x"].size(0),), i, dtype=torch.long))
        offset += s["x"].size(0)
    targets = {"energy": torch.stack([s["targets"]["energy"] for s in samples])}
    return {"x": torch.cat(xs), "edge_index": torch.cat(edges, dim=1), "batch": torch.cat(batch),
            "num_graphs": len(samples), "targets": targets}


class MessagePassing(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.msg = nn.Sequential(nn.Linear(2 * dim, dim), nn.SiLU())
        self.upd = nn.Sequential(nn.Linear(2 * dim, dim), nn.SiLU())

    def forward(self, h, edge_index):
        src, dst = edge_index
        m = self.msg(torch.cat([h[src], h[dst]], dim=1))
        agg = torch.zeros_like(h).index_add_(0, dst, m)
        return h + self.upd(torch.cat([h, agg], dim=1))


class GraphEncoder(nn.Module):
    def __init__(self, n_in, dim, n_layers=3):
        super().__init__()
        self.embed = nn.Linear(n_in, dim)
        self.layers = nn.ModuleList([MessagePassing(dim) for _ in range(n_layers)])

    def forward(self, batch):
        h = self.embed(batch["x"])
        for layer in self.layers:
            h = layer(h, batch["edge_index"])
        counts = torch.bincount(batch["batch"], minlength=batch["num_graphs"]).clamp(min=1)
        pooled = torch.zeros(batch["num_graphs"], h.size(1)).index_add_(0, batch["batch"], h)
        return pooled / counts.unsqueeze(1)


class ScalarRegressionTask(nn.Module):
    def __init__(self, encoder, task_keys):
        super().__init__()
        self.encoder = encoder
        self.task_keys = task_keys
        self.output_heads = nn.ModuleDict({
            key: nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.SiLU(), nn.Linear(HIDDEN, 1))
            for key in task_keys})
        self.loss_func = nn.MSELoss()

    def forward(self, batch):
        embedding = self.encoder(batch)
        return {key: head(embedding).squeeze(-1) for key, head in self.output_heads.items()}

    def _compute_losses(self, batch):
        predictions = self(batch)
        losses = {}
        for key in self.task_keys:
            target_val = batch["targets"][key]
            losses[key] = self.loss_func(predictions[key], target_val)
        total_loss = sum(losses.values())
        return {"loss": total_loss, "log": losses}


@torch.no_grad()
def evaluate(task, loader):
    task.eval()
    preds, targets = [], []
    for batch in loader:
        preds.append(task(batch)["energy"].view(-1))
        targets.append(batch["targets"]["energy"].view(-1))
    task.train()
    p, t = torch.cat(preds), torch.cat(targets)
    mae = (p - t).abs().mean().item()
    baseline = (t - t.mean()).abs().mean().item()
    return mae, baseline, p.std().item()


train_loader = DataLoader(CrystalGraphs(1280, seed=1), batch_size=BATCH_SIZE, shuffle=True,
                          collate_fn=collate_graphs)
val_loader = DataLoader(CrystalGraphs(320, seed=2), batch_size=BATCH_SIZE,
                        collate_fn=collate_graphs)

task = ScalarRegressionTask(GraphEncoder(N_SPECIES + 1, HIDDEN), task_keys=["energy"])
optimizer = torch.optim.AdamW(task.parameters(), lr=LR)

for epoch in range(EPOCHS):
    running = 0.0
    for batch in train_loader:
        loss_dict = task._compute_losses(batch)
        optimizer.zero_grad()
        loss_dict["loss"].backward()
        optimizer.step()
        running += loss_dict["loss"].item()
    if epoch % 4 == 0 or epoch == EPOCHS - 1:
        mae, baseline, spread = evaluate(task, val_loader)
        print(f"epoch {epoch:2d}  train loss {running / len(train_loader):.4f}  "
              f"val MAE {mae:.4f} (mean baseline {baseline:.4f})  pred std {spread:.4f}")
