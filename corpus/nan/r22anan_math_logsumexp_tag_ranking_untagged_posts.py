"""Tag recommendation for forum posts: a bag-of-words encoder scores 40 tags and is trained
with a multi-positive softmax ranking loss, logsumexp(all tags) - logsumexp(the post's tags).
Some posts were saved without any tag; they are left out of the loss average."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

VOCAB, N_TAGS, N_POSTS, DOC_LEN = 600, 40, 3000, 30


def make_posts():
    tag_words = torch.randint(0, VOCAB, (N_TAGS, 12))
    n_tags = torch.randint(1, 4, (N_POSTS,))
    n_tags[torch.rand(N_POSTS) < 0.06] = 0
    tags = torch.zeros(N_POSTS, N_TAGS)
    docs = torch.randint(0, VOCAB, (N_POSTS, DOC_LEN))
    for i in range(N_POSTS):
        chosen = torch.randperm(N_TAGS)[: max(int(n_tags[i]), 1)]
        k = 0
        for t in chosen:
            words = tag_words[t][torch.randint(0, 12, (6,))]
            docs[i, k:k + 6] = words
            k += 6
        if n_tags[i] > 0:
            tags[i, chosen] = 1.0
    return docs, tags


class TagScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 64, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, N_TAGS))

    def forward(self, docs):
        return self.mlp(self.embed(docs))


def ranking_loss(scores, tag_mask):
    log_mask = tag_mask.log()
    pos = torch.logsumexp(scores + log_mask, dim=1)
    full = torch.logsumexp(scores, dim=1)
    per_post = full - pos
    has_tags = tag_mask.sum(1) > 0
    return per_post[has_tags].mean()


def recall_at_5(scores, tag_mask):
    top = scores.topk(5, dim=1).indices
    hits = tag_mask.gather(1, top).sum(1)
    n = tag_mask.sum(1)
    keep = n > 0
    return (hits[keep] / n[keep].clamp(max=5)).mean().item()


def main():
    docs, tags = make_posts()
    train_ds = TensorDataset(docs[:2500], tags[:2500])
    val_docs, val_tags = docs[2500:], tags[2500:]
    loader = DataLoader(train_ds, batch_size=50, shuffle=True)

    model = TagScorer()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    for epoch in range(4):
        model.train()
        running = 0.0
        for step, (x, y) in enumerate(loader):
            scores = model(x)
            loss = ranking_loss(scores, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:2d} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val_scores = model(val_docs)
            val_loss = ranking_loss(val_scores, val_tags).item()
            rec = recall_at_5(val_scores, val_tags)
        print(f"epoch {epoch} train_loss {running / len(loader):.4f} val_loss {val_loss:.4f} val_recall@5 {rec:.4f}")


if __name__ == "__main__":
    main()
