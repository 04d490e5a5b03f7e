"""Siamese sentence encoder for paraphrase detection, trained with an angular (arc-cosine) distance loss."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB = 500
N_TOPICS = 40
MAX_LEN = 12
MARGIN = 1.2


def make_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    topic_words = torch.randint(1, VOCAB, (N_TOPICS, 25), generator=g)
    a_list, b_list, y_list = [], [], []
    for _ in range(n):
        t = torch.randint(0, N_TOPICS, (1,), generator=g).item()
        a = topic_words[t][torch.randint(0, 25, (MAX_LEN,), generator=g)]
        r = torch.rand(1, generator=g).item()
        if r < 0.04:
            b, y = a.clone(), 1.0
        elif r < 0.5:
            b, y = topic_words[t][torch.randint(0, 25, (MAX_LEN,), generator=g)], 1.0
        else:
            t2 = (t + torch.randint(1, N_TOPICS, (1,), generator=g).item()) % N_TOPICS
            b, y = topic_words[t2][torch.randint(0, 25, (MAX_LEN,), generator=g)], 0.0
        a_list.append(a)
        b_list.append(b)
        y_list.append(y)
    return torch.stack(a_list), torch.stack(b_list), torch.tensor(y_list)


class ParaphrasePairs(Dataset):
    def __init__(self, n, seed):
        self.a, self.b, self.y = make_pairs(n, seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.a[i], self.b[i], self.y[i]


class SentenceEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, dim)
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, dim))

    def forward(self, tokens):
        return self.proj(self.embedding(tokens).mean(dim=1))


def angle_between(u, v):
    cos = F.cosine_similarity(u, v, dim=-1)
    return torch.acos(cos.clamp(-1.0, 1.0))


def angular_contrastive_loss(theta, y):
    pos = y * theta
    neg = (1 - y) * F.relu(MARGIN - theta)
    return (pos + neg).mean()


def main():
    train_loader = DataLoader(ParaphrasePairs(3200, seed=1), batch_size=32, shuffle=True)
    val_set = ParaphrasePairs(800, seed=2)
    model = SentenceEncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    step = 0
    t0 = time.time()
    for epoch in range(2):
        model.train()
        total, batches = 0.0, 0
        for a, b, y in train_loader:
            theta = angle_between(model(a), model(b))
            loss = angular_contrastive_loss(theta, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            total += loss.item()
            batches += 1
            if step % 25 == 0:
                print(f"epoch {epoch} step {step} loss {total / batches:.4f}")
        model.eval()
        with torch.no_grad():
            theta = angle_between(model(val_set.a), model(val_set.b))
            acc = ((theta < MARGIN / 2).float() == val_set.y).float().mean().item()
        print(f"epoch {epoch} train loss {total / batches:.4f} val acc {acc:.3f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
