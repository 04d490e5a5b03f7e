"""Multi-label-ish text classifier (bag of embeddings + GRU) on a synthetic
news-title corpus. The vocabulary is built from the training texts."""
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

NUM_CLASSES = 4
SEQ_LEN = 12
TOPIC_WORDS = [[f"t{c}w{i}" for i in range(30)] for c in range(NUM_CLASSES)]
COMMON_WORDS = [f"common{i}" for i in range(200)]


def make_text(label, rare_pool):
    words = []
    for _ in range(SEQ_LEN):
        r = random.random()
        if r < 0.45:
            words.append(random.choice(TOPIC_WORDS[label]))
        elif r < 0.97:
            words.append(random.choice(COMMON_WORDS))
        else:
            words.append(rare_pool())
    return " ".join(words)


def corpus(n, prefix):
    counter = [0]

    def rare():
        counter[0] += 1
        return f"{prefix}rare{counter[0]}"

    data = []
    for _ in range(n):
        y = random.randrange(NUM_CLASSES)
        data.append((make_text(y, rare), y))
    return data


train_data = corpus(1600, "tr")
val_data = corpus(400, "va")


def build_vocab(texts):
    word2idx = {"<pad>": 0}
    for t in texts:
        for w in t.split():
            if w not in word2idx:
                word2idx[w] = len(word2idx)
    return word2idx


word2idx = build_vocab([t for t, _ in train_data])
UNK = len(word2idx)


class TextDataset(Dataset):
    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        text, y = self.data[i]
        ids = [word2idx.get(w, UNK) for w in text.split()]
        return torch.tensor(ids, dtype=torch.long), torch.tensor(y)


class TextGRU(nn.Module):
    def __init__(self, vocab_size, emb_dim=32, hidden=64, num_classes=NUM_CLASSES):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=0)
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        emb = self.embedding(x)
        _, h = self.gru(emb)
        return self.fc(h[-1])


train_loader = DataLoader(TextDataset(train_data), batch_size=32, shuffle=True)
val_loader = DataLoader(TextDataset(val_data), batch_size=64)

model = TextGRU(len(word2idx))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f}")

    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            pred = model(x).argmax(dim=1)
            correct += (pred == y).sum().item()
    print(f"epoch {epoch} val acc {correct / len(val_data):.3f}")
