"""BiLSTM part-of-speech style tagger on a small synthetic corpus.

Sentences are made from word classes (determiners, adjectives, nouns, verbs, adverbs,
prepositions); each token is tagged with its class. Sentences are padded per batch and the
padded positions are left out of the loss.
"""
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

LEXICON = {
    "NOUN": ["cat", "dog", "house", "river", "teacher", "car", "tree", "book", "city", "bird",
             "child", "road", "table", "garden", "window", "song"],
    "DET": ["the", "a", "this", "that", "every", "some"],
    "ADJ": ["old", "red", "small", "quiet", "bright", "heavy", "green", "happy"],
    "VERB": ["sees", "likes", "finds", "takes", "paints", "follows", "reads", "builds"],
    "ADV": ["slowly", "often", "quickly", "rarely", "again"],
    "ADP": ["near", "under", "behind", "with", "over"],
}
TAGS = list(LEXICON)


def make_sentence():
    toks = []

    def noun_phrase():
        toks.append((random.choice(LEXICON["DET"]), "DET"))
        for _ in range(random.randint(0, 2)):
            toks.append((random.choice(LEXICON["ADJ"]), "ADJ"))
        toks.append((random.choice(LEXICON["NOUN"]), "NOUN"))

    noun_phrase()
    if random.random() < 0.4:
        toks.append((random.choice(LEXICON["ADV"]), "ADV"))
    toks.append((random.choice(LEXICON["VERB"]), "VERB"))
    noun_phrase()
    if random.random() < 0.5:
        toks.append((random.choice(LEXICON["ADP"]), "ADP"))
        noun_phrase()
    if random.random() < 0.3:
        toks.append((random.choice(LEXICON["ADV"]), "ADV"))
    return toks


class TaggingDataset(Dataset):
    def __init__(self, sentences, word2idx, tag2idx):
        self.items = [([word2idx[w] for w, _ in s], [tag2idx[t] for _, t in s]) for s in sentences]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        words, tags = self.items[i]
        return torch.tensor(words), torch.tensor(tags)


PAD_INDEX = 0


def collate(batch):
    words = pad_sequence([b[0] for b in batch], batch_first=True, padding_value=PAD_INDEX)
    tags = pad_sequence([b[1] for b in batch], batch_first=True, padding_value=PAD_INDEX)
    return words, tags


class Tagger(nn.Module):
    def __init__(self, vocab_size, n_tags, emb=32, hidden=48):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=PAD_INDEX)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, n_tags)

    def forward(self, words):
        h, _ = self.lstm(self.embed(words))
        return self.proj(h)


train_sents = [make_sentence() for _ in range(1200)]
valid_sents = [make_sentence() for _ in range(300)]

word2idx = {"<pad>": PAD_INDEX}
for s in train_sents + valid_sents:
    for w, _ in s:
        word2idx.setdefault(w, len(word2idx))
tag2idx = {t: i for i, t in enumerate(TAGS)}
print("tags:", tag2idx)

train_dl = DataLoader(TaggingDataset(train_sents, word2idx, tag2idx), batch_size=32,
                      shuffle=True, collate_fn=collate)
valid_dl = DataLoader(TaggingDataset(valid_sents, word2idx, tag2idx), batch_size=64,
                      collate_fn=collate)

model = Tagger(len(word2idx), len(tag2idx))
criterion = nn.CrossEntropyLoss(ignore_index=PAD_INDEX)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)


def evaluate():
    model.eval()
    correct = torch.zeros(len(TAGS))
    total = torch.zeros(len(TAGS))
    with torch.no_grad():
        for words, tags in valid_dl:
            pred = model(words).argmax(-1)
            real = words != PAD_INDEX
            for t in range(len(TAGS)):
                m = real & (tags == t)
                total[t] += m.sum()
                correct[t] += (m & (pred == t)).sum()
    model.train()
    return correct.sum().item() / total.sum().item(), correct / total.clamp(min=1)


for epoch in range(6):
    running = 0.0
    for step, (words, tags) in enumerate(train_dl):
        logits = model(words)
        loss = criterion(logits.reshape(-1, logits.size(-1)), tags.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    acc, per_tag = evaluate()
    per_tag_str = " ".join(f"{t}={a:.2f}" for t, a in zip(TAGS, per_tag.tolist()))
    print(f"epoch {epoch + 1} train loss {running / len(train_dl):.4f} valid token acc {acc:.3f} | {per_tag_str}")
