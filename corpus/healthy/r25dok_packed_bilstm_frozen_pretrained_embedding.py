"""Sentiment classification with a bidirectional LSTM over padded, variable-length reviews, after
bentrevett/pytorch-sentiment-analysis (2_lstm): pack_padded_sequence(enforce_sorted=False), the
final forward/backward hidden states concatenated, CrossEntropyLoss over 2 classes. The word
vectors stand in for pretrained GloVe vectors (built here: topic clusters plus a sentiment
direction) and are kept frozen; only the LSTM and the head are trained."""
import collections

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(1234)

VOCAB = 300
PAD, UNK = 0, 1
POS_WORDS = list(range(10, 30))
NEG_WORDS = list(range(30, 50))
NEGATORS = [50, 51]


def sample_review(g, label):
    length = int(torch.randint(8, 40, (1,), generator=g))
    toks = torch.randint(52, VOCAB, (length,), generator=g).tolist()
    n_sent = max(1, length // 8)
    for _ in range(n_sent):
        pos = int(torch.randint(0, length, (1,), generator=g))
        flip = torch.rand(1, generator=g).item() < 0.15
        word_label = 1 - label if flip else label
        pool = POS_WORDS if word_label == 1 else NEG_WORDS
        toks[pos] = pool[int(torch.randint(0, len(pool), (1,), generator=g))]
        if flip and pos > 0:
            toks[pos - 1] = NEGATORS[int(torch.randint(0, 2, (1,), generator=g))]
    return toks


def pretrained_vectors(dim=50, seed=7):
    g = torch.Generator().manual_seed(seed)
    topics = torch.randn(12, dim, generator=g)
    sentiment = torch.randn(dim, generator=g)
    word_topic = torch.randint(0, 12, (VOCAB,), generator=g)
    vectors = topics[word_topic] + 0.8 * torch.randn(VOCAB, dim, generator=g)
    vectors[POS_WORDS] += 2.0 * sentiment
    vectors[NEG_WORDS] -= 2.0 * sentiment
    vectors[NEGATORS] += 1.5 * torch.randn(dim, generator=g)
    vectors = vectors / vectors.norm(dim=1, keepdim=True)
    vectors[PAD] = 0.0
    vectors[UNK] = 0.0
    return vectors


class ReviewDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for i in range(n):
            label = int(torch.randint(0, 2, (1,), generator=g))
            self.items.append((torch.tensor(sample_review(g, label)), label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        ids, label = self.items[idx]
        return {"ids": ids, "length": len(ids), "label": label}


def collate(batch):
    ids = nn.utils.rnn.pad_sequence([b["ids"] for b in batch], batch_first=True, padding_value=PAD)
    length = torch.tensor([b["length"] for b in batch])
    label = torch.tensor([b["label"] for b in batch])
    return {"ids": ids, "length": length, "label": label}


class LSTM(nn.Module):
    def __init__(self, embedding, hidden_dim, output_dim, n_layers, bidirectional, dropout_rate, pad_index):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(embedding, freeze=True, padding_idx=pad_index)
        self.lstm = nn.LSTM(embedding.shape[1], hidden_dim, n_layers, bidirectional=bidirectional,
                            dropout=dropout_rate, batch_first=True)
        self.fc = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, ids, length):
        embedded = self.dropout(self.embedding(ids))
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, length, batch_first=True, enforce_sorted=False)
        packed_output, (hidden, cell) = self.lstm(packed_embedded)
        output, output_length = nn.utils.rnn.pad_packed_sequence(packed_output)
        if self.lstm.bidirectional:
            hidden = self.dropout(torch.cat([hidden[-1], hidden[-2]], dim=-1))
        else:
            hidden = self.dropout(hidden[-1])
        return self.fc(hidden)


def get_accuracy(prediction, label):
    return (prediction.argmax(dim=-1) == label).float().mean()


def train(data_loader, model, criterion, optimizer):
    model.train()
    losses, accs = [], []
    for batch in data_loader:
        prediction = model(batch["ids"], batch["length"])
        loss = criterion(prediction, batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accs.append(get_accuracy(prediction, batch["label"]).item())
    return sum(losses) / len(losses), sum(accs) / len(accs)


def evaluate(data_loader, model, criterion):
    model.eval()
    losses, accs = [], []
    with torch.no_grad():
        for batch in data_loader:
            prediction = model(batch["ids"], batch["length"])
            losses.append(criterion(prediction, batch["label"]).item())
            accs.append(get_accuracy(prediction, batch["label"]).item())
    return sum(losses) / len(losses), sum(accs) / len(accs)


vectors = pretrained_vectors()
train_loader = DataLoader(ReviewDataset(768, seed=1), batch_size=64, shuffle=True, collate_fn=collate)
valid_loader = DataLoader(ReviewDataset(256, seed=2), batch_size=64, collate_fn=collate)
model = LSTM(vectors, hidden_dim=32, output_dim=2, n_layers=2, bidirectional=True, dropout_rate=0.3, pad_index=PAD)
n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"The model has {n_trainable:,} trainable parameters")
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
metrics = collections.defaultdict(list)
for epoch in range(6):
    train_loss, train_acc = train(train_loader, model, criterion, optimizer)
    valid_loss, valid_acc = evaluate(valid_loader, model, criterion)
    metrics["valid_acc"].append(valid_acc)
    print(f"epoch: {epoch} train_loss: {train_loss:.3f}, train_acc: {train_acc:.3f} "
          f"valid_loss: {valid_loss:.3f}, valid_acc: {valid_acc:.3f}")
