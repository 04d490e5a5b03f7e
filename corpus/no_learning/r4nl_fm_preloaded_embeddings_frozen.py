"""Click-through prediction with a factorization machine, RecBole style.

The user and item vectors exported by last quarter's model are preloaded (the `.useremb` /
`.itememb` features of the atomic files, here made in memory) and used to initialise the
embedding tables, as in RecBole's "Load Pre-trained Embedding" guide; this quarter's clicks
are then used to train the model.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

config = {
    "embedding_size": 16,
    "learning_rate": 0.01,
    "train_batch_size": 512,
    "epochs": 3,
    "eval_step": 1,
    "seed": 2020,
    "preload_weight": {"uid": "user_emb", "iid": "item_emb"},
}

np.random.seed(config["seed"])
torch.manual_seed(config["seed"])

N_USERS, N_ITEMS, N_INTER = 300, 200, 40000


def load_preloaded_features(n, dim, rng):
    """Stand-in for dataset.get_preload_weight(): one float vector per id (row 0 = padding)."""
    emb = rng.normal(0.0, 0.1, size=(n + 1, dim)).astype(np.float32)
    emb[0] = 0.0
    return emb


def make_interactions(rng):
    """This quarter's clicks: the click probability depends on the user-item match only."""
    taste_u = rng.normal(size=(N_USERS + 1, 8))
    taste_i = rng.normal(size=(N_ITEMS + 1, 8))
    uid = rng.integers(1, N_USERS + 1, size=N_INTER)
    iid = rng.integers(1, N_ITEMS + 1, size=N_INTER)
    score = (taste_u[uid] * taste_i[iid]).sum(1) / np.sqrt(8)
    label = (rng.random(N_INTER) < 1.0 / (1.0 + np.exp(-3.0 * score))).astype(np.float32)
    return uid, iid, label


class InteractionDataset(Dataset):
    def __init__(self, uid, iid, label):
        self.uid = torch.from_numpy(uid)
        self.iid = torch.from_numpy(iid)
        self.label = torch.from_numpy(label)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, idx):
        return {"user_id": self.uid[idx], "item_id": self.iid[idx], "label": self.label[idx]}


class FM(nn.Module):
    """Factorization machine over the user and item fields."""

    def __init__(self, config, pretrained_user_emb, pretrained_item_emb):
        super().__init__()
        self.embedding_size = config["embedding_size"]
        self.user_embedding = nn.Embedding.from_pretrained(torch.from_numpy(pretrained_user_emb))
        self.item_embedding = nn.Embedding.from_pretrained(torch.from_numpy(pretrained_item_emb))
        self.user_linear = nn.Embedding(pretrained_user_emb.shape[0], 1)
        self.item_linear = nn.Embedding(pretrained_item_emb.shape[0], 1)
        self.bias = nn.Parameter(torch.zeros(1))
        nn.init.zeros_(self.user_linear.weight)
        nn.init.zeros_(self.item_linear.weight)
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, interaction):
        u = self.user_embedding(interaction["user_id"])
        i = self.item_embedding(interaction["item_id"])
        first_order = self.bias + self.user_linear(interaction["user_id"]).squeeze(-1) \
            + self.item_linear(interaction["item_id"]).squeeze(-1)
        second_order = (u * i).sum(dim=-1)
        return first_order + second_order

    def calculate_loss(self, interaction):
        return self.loss(self.forward(interaction), interaction["label"])

    def predict(self, interaction):
        return torch.sigmoid(self.forward(interaction))


def auc(scores, labels):
    order = torch.argsort(scores)
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float)
    n_pos = labels.sum()
    n_neg = len(labels) - n_pos
    return float((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(model, loader):
    model.eval()
    scores, labels, losses = [], [], []
    with torch.no_grad():
        for batch in loader:
            losses.append(model.calculate_loss(batch).item())
            scores.append(model.predict(batch))
            labels.append(batch["label"])
    return float(np.mean(losses)), auc(torch.cat(scores), torch.cat(labels))


def main():
    rng = np.random.default_rng(config["seed"])
    pretrained_user_emb = load_preloaded_features(N_USERS, config["embedding_size"], rng)
    pretrained_item_emb = load_preloaded_features(N_ITEMS, config["embedding_size"], rng)
    uid, iid, label = make_interactions(rng)
    split = int(0.8 * N_INTER)
    train_data = DataLoader(InteractionDataset(uid[:split], iid[:split], label[:split]),
                            batch_size=config["train_batch_size"], shuffle=True)
    valid_data = DataLoader(InteractionDataset(uid[split:], iid[split:], label[split:]), batch_size=2048)

    model = FM(config, pretrained_user_emb, pretrained_item_emb)
    print(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["learning_rate"])

    step = 0
    for epoch_idx in range(config["epochs"]):
        model.train()
        total_loss = 0.0
        for batch_idx, interaction in enumerate(train_data):
            optimizer.zero_grad()
            loss = model.calculate_loss(interaction)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch_idx} step {step:4d}  train loss {loss.item():.4f}")
        valid_loss, valid_auc = evaluate(model, valid_data)
        print(f"epoch {epoch_idx} training [train loss: {total_loss / len(train_data):.4f}]  "
              f"evaluating [valid loss: {valid_loss:.4f}, auc: {valid_auc:.4f}]")


if __name__ == "__main__":
    main()
