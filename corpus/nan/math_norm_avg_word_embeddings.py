"""Average-word-embedding sentence encoder trained with a cosine-similarity loss.

Pairs of short "sentences" are labelled 1 when they are about the same topic and 0 otherwise;
the cosine similarity of the two sentence embeddings is regressed onto the label.
Words outside the training vocabulary are mapped to [UNK] (index 0).
"""
import random
from collections import Counter

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

random.seed(1)
torch.manual_seed(1)

N_TOPICS = 6
WORDS_PER_TOPIC = 40
MAX_VOCAB = 180

topic_words = [[f"t{t}w{i}" for i in range(WORDS_PER_TOPIC)] for t in range(N_TOPICS)]
common_words = [f"c{i}" for i in range(30)]


def make_sentence(topic):
    n = random.randint(2, 8)
    words = []
    for _ in range(n):
        if random.random() < 0.6:
            # Zipf-like: the first words of a topic are used much more often
            idx = min(int(random.expovariate(0.12)), WORDS_PER_TOPIC - 1)
            words.append(topic_words[topic][idx])
        else:
            words.append(random.choice(common_words))
    return words


def make_pairs(n):
    pairs = []
    for _ in range(n):
        t1 = random.randrange(N_TOPICS)
        same = random.random() < 0.5
        t2 = t1 if same else random.choice([t for t in range(N_TOPICS) if t != t1])
        pairs.append((make_sentence(t1), make_sentence(t2), float(same)))
    return pairs


train_pairs = make_pairs(3000)
counts = Counter(w for s1, s2, _ in train_pairs for w in s1 + s2)
vocab = {"[UNK]": 0}
for w, _ in counts.most_common(MAX_VOCAB):
    vocab[w] = len(vocab)


def encode(words, max_len=8):
    ids = [vocab.get(w, 0) for w in words][:max_len]
    return ids + [0] * (max_len - len(ids))


class PairDataset(Dataset):
    def __init__(self, pairs):
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        s1, s2, y = self.pairs[i]
        return torch.tensor(encode(s1)), torch.tensor(encode(s2)), torch.tensor(y)


class AvgWordEmbeddings(nn.Module):
    def __init__(self, vocab_size, dim=32):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=0)

    def forward(self, ids):
        return self.emb(ids)


def cos_sim(a, b):
    a_norm = a / a.norm(dim=1, keepdim=True)
    b_norm = b / b.norm(dim=1, keepdim=True)
    return (a_norm * b_norm).sum(dim=1)


model = AvgWordEmbeddings(len(vocab))
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
loader = DataLoader(PairDataset(train_pairs), batch_size=32, shuffle=True)
loss_fn = nn.MSELoss()

for epoch in range(3):
    total, correct, seen = 0.0, 0, 0
    for i, (x1, x2, y) in enumerate(loader):
        sim = cos_sim(model(x1), model(x2))
        loss = loss_fn(sim, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        correct += ((sim > 0.5).float() == y).sum().item()
        seen += len(y)
        if i % 20 == 0:
            print(f"epoch {epoch} batch {i:3d}  loss {loss.item():.4f}")
    print(f"== epoch {epoch}  train loss {total / len(loader):.4f}  acc {correct / seen:.3f}")
