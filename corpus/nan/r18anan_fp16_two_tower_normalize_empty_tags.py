"""Two-tower retrieval model for a recipe recommender: the user tower embeds the user's recent
clicks, the item tower is content-based (mean of the recipe's tag embeddings), both are
L2-normalised and scored by cosine similarity with an in-batch softmax. The towers run in
half precision to keep the embedding tables small.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_USERS = 2000
N_ITEMS = 1500
N_TAGS = 300
N_TOPICS = 12
HISTORY = 10
EMB = 32
TEMPERATURE = 0.1
BATCH_SIZE = 128
EPOCHS = 5
LR = 0.3


def make_catalogue(rng):
    item_topic = rng.integers(0, N_TOPICS, N_ITEMS)
    tag_topic = rng.integers(0, N_TOPICS, N_TAGS)
    item_tags = []
    for i in range(N_ITEMS):
        if rng.random() < 0.04:
            item_tags.append([])
            continue
        own = np.flatnonzero(tag_topic == item_topic[i])
        k = rng.integers(2, 7)
        tags = list(rng.choice(own, size=min(k, len(own)), replace=False)) + list(rng.integers(0, N_TAGS, 1))
        item_tags.append(tags)
    return item_topic, item_tags


def make_interactions(rng, item_topic, n):
    user_pref = rng.integers(0, N_TOPICS, (N_USERS, 2))
    by_topic = [np.flatnonzero(item_topic == t) for t in range(N_TOPICS)]
    rows = []
    for _ in range(n):
        u = rng.integers(0, N_USERS)
        topics = user_pref[u][rng.integers(0, 2, HISTORY + 1)]
        clicks = [rng.choice(by_topic[t]) for t in topics]
        rows.append((clicks[:HISTORY], clicks[HISTORY]))
    return rows


class ClickDataset(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        history, target = self.rows[i]
        return torch.tensor(history), torch.tensor(target)


class TwoTower(nn.Module):
    def __init__(self, item_tags):
        super().__init__()
        self.click_emb = nn.Embedding(N_ITEMS, EMB)
        self.user_mlp = nn.Sequential(nn.Linear(EMB, 64), nn.ReLU(), nn.Linear(64, EMB))
        self.tag_emb = nn.EmbeddingBag(N_TAGS, EMB, mode="mean")
        flat = [t for tags in item_tags for t in tags]
        offsets = np.cumsum([0] + [len(tags) for tags in item_tags[:-1]])
        self.register_buffer("tag_index", torch.tensor(flat, dtype=torch.long))
        self.register_buffer("tag_offsets", torch.tensor(offsets, dtype=torch.long))

    def user_tower(self, history):
        h = self.user_mlp(self.click_emb(history).mean(dim=1))
        return F.normalize(h, dim=-1)

    def item_tower(self, items):
        all_items = self.tag_emb(self.tag_index, self.tag_offsets)
        return F.normalize(all_items[items], dim=-1)

    def forward(self, history, items):
        return self.user_tower(history) @ self.item_tower(items).t() / TEMPERATURE


def recall_at_k(model, rows, k=20):
    history = torch.tensor([r[0] for r in rows])
    target = torch.tensor([r[1] for r in rows])
    with torch.no_grad():
        scores = model(history, torch.arange(N_ITEMS))
    topk = scores.float().topk(k, dim=1).indices
    return (topk == target[:, None]).any(dim=1).float().mean().item()


def main():
    rng = np.random.default_rng(5)
    item_topic, item_tags = make_catalogue(rng)
    print(f"{N_ITEMS} recipes, {sum(len(t) == 0 for t in item_tags)} without tags")
    train_rows = make_interactions(rng, item_topic, 5120)
    val_rows = make_interactions(rng, item_topic, 500)
    loader = DataLoader(ClickDataset(train_rows), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)

    model = TwoTower(item_tags).half()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    step = 0
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for history, target in loader:
            logits = model(history, target)
            loss = F.cross_entropy(logits.float(), torch.arange(len(target)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
            step += 1
        print(f"epoch {epoch} train_loss {np.mean(losses):.4f} val_recall@20 {recall_at_k(model, val_rows):.3f}")


if __name__ == "__main__":
    main()
