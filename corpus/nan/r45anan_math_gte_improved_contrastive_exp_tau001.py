"""Bi-encoder sentence embeddings trained with the improved contrastive loss (GTE style).

Synthetic retrieval pairs: every query and its relevant passage share a hidden topic; words are
drawn from the topic's vocabulary plus common filler words. The encoder is a bag-of-words
embedding with a projection head; evaluation is recall@1 of query -> passage on a held-out set.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
VOCAB = 2000
N_TOPICS = 200
FILLER = 300


def make_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    topic_words = torch.randint(FILLER, VOCAB, (N_TOPICS, 12), generator=torch.Generator().manual_seed(123))
    topics = torch.randint(0, N_TOPICS, (n,), generator=g)

    def sample(length):
        own = topic_words[topics][torch.arange(n).unsqueeze(1), torch.randint(0, 12, (n, length // 2), generator=g)]
        filler = torch.randint(0, FILLER, (n, length - length // 2), generator=g)
        return torch.cat([own, filler], 1)

    return sample(8), sample(24)


class PairDataset(Dataset):
    def __init__(self, queries, passages):
        self.queries, self.passages = queries, passages

    def __len__(self):
        return len(self.queries)

    def __getitem__(self, i):
        return self.queries[i], self.passages[i]


class SentenceEncoder(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.dense = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, tokens):
        h = F.gelu(self.dense(self.embeddings(tokens)))
        return F.normalize(F.gelu(self.out(h)), dim=-1)


class ImprovedContrastiveLoss(nn.Module):
    def __init__(self, model, temperature=0.01):
        super().__init__()
        self.model = model
        self.temperature = temperature

    def exp_sim(self, a, b):
        return torch.exp(a @ b.T / self.temperature)

    def forward(self, queries, passages):
        q = self.model(queries)
        d = self.model(passages)
        exp_qd = self.exp_sim(q, d)
        exp_qq = self.exp_sim(q, q)
        exp_dd = self.exp_sim(d, d)
        exp_dq = self.exp_sim(d, q)
        eye = torch.eye(len(q), dtype=torch.bool)
        exp_qq = exp_qq.masked_fill(eye, 0)
        exp_dd = exp_dd.masked_fill(eye, 0)
        partition = exp_qd.sum(1) + exp_qq.sum(1) + exp_dd.sum(1) + exp_dq.sum(1) - exp_dq.diag()
        return -torch.log(exp_qd.diag() / partition).mean()


@torch.no_grad()
def recall_at_1(model, queries, passages):
    q, d = model(queries), model(passages)
    return ((q @ d.T).argmax(1) == torch.arange(len(q))).float().mean().item()


def main():
    start = time.time()
    train_q, train_d = make_pairs(4000, seed=1)
    test_q, test_d = make_pairs(200, seed=2)
    loader = DataLoader(PairDataset(train_q, train_d), batch_size=64, shuffle=True, drop_last=True)
    model = SentenceEncoder()
    criterion = ImprovedContrastiveLoss(model, temperature=0.01)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    step = 0
    for epoch in range(3):
        model.train()
        running = 0.0
        for queries, passages in loader:
            loss = criterion(queries, passages)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            running += loss.item()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:3d} | loss {loss.item():.4f}")
        model.eval()
        print(f"epoch {epoch} | mean loss {running / len(loader):.4f} | test recall@1 {recall_at_1(model, test_q, test_d):.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
