"""Question-pair matching (are the two questions about the same topic?) with a shared
packed LSTM encoder, [u, v, |u-v|, u*v] features and an MLP classifier."""
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)

VOCAB = 200
N_TOPICS = 8
PAD = 0


def make_sentence(topic, rng):
    n = rng.randint(3, 14)
    words = []
    for _ in range(n):
        if rng.random() < 0.8:
            words.append(1 + topic * 20 + rng.randrange(20))
        else:
            words.append(161 + rng.randrange(VOCAB - 161))
    return words


class QuestionPairs(Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.pairs = []
        for _ in range(n):
            ta = rng.randrange(N_TOPICS)
            same = rng.random() < 0.5
            tb = ta if same else rng.choice([t for t in range(N_TOPICS) if t != ta])
            self.pairs.append((make_sentence(ta, rng), make_sentence(tb, rng), int(same)))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]


def collate(batch):
    a = [torch.tensor(x[0]) for x in batch]
    b = [torch.tensor(x[1]) for x in batch]
    return (pad_sequence(a, batch_first=True, padding_value=PAD), torch.tensor([len(x) for x in a]),
            pad_sequence(b, batch_first=True, padding_value=PAD), torch.tensor([len(x) for x in b]),
            torch.tensor([x[2] for x in batch]))


class Encoder(nn.Module):
    def __init__(self, emb_dim=32, hidden=64):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, emb_dim, padding_idx=PAD)
        self.rnn = nn.LSTM(emb_dim, hidden, batch_first=True)

    def forward(self, input_ids, input_lens):
        sorted_lens, sorted_idx = torch.sort(input_lens, 0, descending=True)
        sorted_word_ids = torch.index_select(input_ids, 0, sorted_idx)
        embs = self.embeddings(sorted_word_ids)
        packed = pack_padded_sequence(embs, sorted_lens, batch_first=True)
        _, (h_n, _) = self.rnn(packed)
        return h_n[-1]


class PairClassifier(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.encoder = Encoder(hidden=hidden)
        self.classifier = nn.Sequential(nn.Linear(4 * hidden, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, a, a_len, b, b_len):
        u = self.encoder(a, a_len)
        v = self.encoder(b, b_len)
        return self.classifier(torch.cat([u, v, (u - v).abs(), u * v], 1))


train_loader = DataLoader(QuestionPairs(2400, 1), batch_size=48, shuffle=True, collate_fn=collate)
val_loader = DataLoader(QuestionPairs(500, 2), batch_size=100, collate_fn=collate)
model = PairClassifier()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

step = 0
for epoch in range(4):
    model.train()
    for a, a_len, b, b_len, y in train_loader:
        logits = model(a, a_len, b, b_len)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 20 == 0:
            acc = (logits.argmax(1) == y).float().mean().item()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f} batch acc {acc:.3f}")
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for a, a_len, b, b_len, y in val_loader:
            correct += (model(a, a_len, b, b_len).argmax(1) == y).sum().item()
            total += len(y)
    print(f"epoch {epoch} val acc {correct / total:.3f}")
