"""DSSM (Huang et al., CIKM 2013) for query-document ranking on a click log, after
nishnik/Deep-Semantic-Similarity-Model-PyTorch: queries and documents are letter-trigram word
hashed, separate tanh towers map them into a 128-d semantic space, and each query is scored by
cosine similarity against its clicked document and J=4 random unclicked ones through a learned
smoothing factor gamma; the target is the clicked document (index 0). The click log is
synthetic: topics with their own vocabularies plus common words."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

LETTER_GRAM_SIZE = 3
TOTAL_LETTER_GRAMS = 2000
K = 300
L = 128
J = 4
BATCH_SIZE = 32
EPOCHS = 3
LR = 0.01


def letter_grams(word):
    w = "#" + word + "#"
    return [w[i:i + LETTER_GRAM_SIZE] for i in range(len(w) - LETTER_GRAM_SIZE + 1)]


def word_hashing(words):
    v = np.zeros(TOTAL_LETTER_GRAMS, np.float32)
    for word in words:
        for g in letter_grams(word):
            v[sum(ord(c) * 31 ** i for i, c in enumerate(g)) % TOTAL_LETTER_GRAMS] += 1.0
    return v


def build_click_log(n_topics=60, n_queries=3500, seed=0):
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(4000)]
    topic_words = [rng.choice(len(vocab), 40, replace=False) for _ in range(n_topics)]
    common = rng.choice(len(vocab), 300, replace=False)
    queries, docs, topics = [], [], []
    for _ in range(n_queries):
        t = rng.integers(n_topics)
        q = [vocab[i] for i in rng.choice(topic_words[t], rng.integers(2, 5))]
        d = [vocab[i] for i in np.concatenate([rng.choice(topic_words[t], 20),
                                               rng.choice(common, 20)])]
        queries.append(word_hashing(q))
        docs.append(word_hashing(d))
        topics.append(t)
    return np.stack(queries), np.stack(docs), np.array(topics)


class ClickDataset(Dataset):
    def __init__(self, queries, docs, seed):
        self.queries, self.docs = torch.from_numpy(queries), torch.from_numpy(docs)
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.queries)

    def __getitem__(self, i):
        possibilities = np.delete(np.arange(len(self.docs)), i)
        negatives = self.rng.choice(possibilities, J, replace=False)
        return self.queries[i], self.docs[i], self.docs[negatives]


class DSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_l1 = nn.Linear(TOTAL_LETTER_GRAMS, K)
        self.query_sem = nn.Linear(K, L)
        self.doc_l1 = nn.Linear(TOTAL_LETTER_GRAMS, K)
        self.doc_sem = nn.Linear(K, L)
        self.learn_gamma = nn.Conv1d(1, 1, 1)

    def forward(self, q, pos, negs):
        q_s = torch.tanh(self.query_sem(torch.tanh(self.query_l1(q))))
        pos_s = torch.tanh(self.doc_sem(torch.tanh(self.doc_l1(pos))))
        neg_ss = [torch.tanh(self.doc_sem(torch.tanh(self.doc_l1(negs[:, j])))) for j in range(J)]
        dots = [F.cosine_similarity(q_s, pos_s, dim=1)]
        dots = dots + [F.cosine_similarity(q_s, neg_s, dim=1) for neg_s in neg_ss]
        dots = torch.stack(dots, dim=1)
        with_gamma = self.learn_gamma(dots.unsqueeze(1)).squeeze(1)
        prob = F.softmax(with_gamma, dim=1)
        return prob


queries, docs, topics = build_click_log()
train_set = ClickDataset(queries[:3000], docs[:3000], seed=1)
val_set = ClickDataset(queries[3000:], docs[3000:], seed=2)
train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_set, batch_size=250)

model = DSSM()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for q, pos, negs in train_loader:
        y_pred = model(q, pos, negs)
        y = torch.zeros(q.size(0), dtype=torch.long)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    model.eval()
    hits, total = 0, 0
    with torch.no_grad():
        for q, pos, negs in val_loader:
            scores = model(q, pos, negs)
            hits += (scores.argmax(1) == 0).sum().item()
            total += q.size(0)
    print(f"epoch {epoch + 1} train loss {running / len(train_loader):.4f} "
          f"val P@1 (clicked doc ranked first of {J + 1}) {hits / total:.3f}")
