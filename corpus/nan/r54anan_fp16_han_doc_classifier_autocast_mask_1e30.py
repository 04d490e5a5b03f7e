"""Hierarchical attention network (word attention -> sentence attention) for review rating
classification, trained with float16 autocast to save memory on long documents."""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
random.seed(0)

VOCAB = 400
PAD = 0
MAX_SENTS = 6
MAX_WORDS = 12
N_CLASSES = 3


def make_reviews(n):
    docs, labels = [], []
    cue_words = [list(range(10 + 20 * c, 30 + 20 * c)) for c in range(N_CLASSES)]
    for _ in range(n):
        label = random.randrange(N_CLASSES)
        n_sents = MAX_SENTS if random.random() > 0.12 else random.randint(2, MAX_SENTS - 1)
        doc = []
        for _ in range(n_sents):
            n_words = random.randint(5, MAX_WORDS)
            words = [random.randrange(80, VOCAB) for _ in range(n_words)]
            if random.random() < 0.8:
                words[random.randrange(n_words)] = random.choice(cue_words[label])
            doc.append(words)
        docs.append(doc)
        labels.append(label)
    return docs, labels


class ReviewDataset(Dataset):
    def __init__(self, docs, labels):
        self.docs, self.labels = docs, labels

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, idx):
        tokens = torch.full((MAX_SENTS, MAX_WORDS), PAD, dtype=torch.long)
        for s, words in enumerate(self.docs[idx][:MAX_SENTS]):
            tokens[s, :len(words)] = torch.tensor(words[:MAX_WORDS])
        return tokens, self.labels[idx]


class AttentionPool(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.context = nn.Linear(dim, 1, bias=False)

    def forward(self, h, mask):
        u = torch.tanh(self.proj(h))
        scores = self.context(u).squeeze(-1)
        mask = mask.to(dtype=scores.dtype)
        scores = scores - 1e30 * (1.0 - mask)
        alpha = F.softmax(scores, dim=-1)
        return torch.bmm(alpha.unsqueeze(1), h).squeeze(1)


class HAN(nn.Module):
    def __init__(self, vocab=VOCAB, emb=32, hid=32, n_classes=N_CLASSES):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.word_enc = nn.Linear(emb, hid)
        self.word_attn = AttentionPool(hid)
        self.sent_enc = nn.Linear(hid, hid)
        self.sent_attn = AttentionPool(hid)
        self.fc = nn.Linear(hid, n_classes)

    def forward(self, tokens):
        b, s, w = tokens.shape
        word_mask = tokens != PAD
        h = torch.relu(self.word_enc(self.embed(tokens.view(b * s, w))))
        sent_vec = self.word_attn(h, word_mask.view(b * s, w)).view(b, s, -1)
        sent_mask = word_mask.any(dim=-1)
        hs = torch.relu(self.sent_enc(sent_vec))
        doc_vec = self.sent_attn(hs, sent_mask)
        return self.fc(doc_vec)


docs, labels = make_reviews(840)
train_loader = DataLoader(ReviewDataset(docs[:640], labels[:640]), batch_size=32, shuffle=True)
val_loader = DataLoader(ReviewDataset(docs[640:], labels[640:]), batch_size=100)

model = HAN()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

step = 0
for epoch in range(4):
    model.train()
    total = 0.0
    for tokens, targets in train_loader:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float(), targets)
        loss.backward()
        optimizer.step()
        step += 1
        total += loss.item()
        if step % 10 == 0 or step <= 3:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        for tokens, targets in val_loader:
            correct += (model(tokens).argmax(-1) == targets).sum().item()
    print(f"epoch {epoch} mean loss {total / len(train_loader):.4f} val acc {correct / 200:.3f}")
