"""Intent classification of short support tickets with a bidirectional LSTM encoder.

The encoder follows fairseq's LSTMEncoder (embedding, packed bidirectional LSTM, the final
hidden states of both directions combined per layer); a linear classifier reads the top
layer's combined state. Tickets are synthetic token sequences: filler words plus a few
keywords of the ticket's intent, of varying length, padded per batch.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB_SIZE = 300
PAD = 0
NUM_CLASSES = 4
KEYWORDS_PER_CLASS = 12
EMBED_DIM = 64
HIDDEN_SIZE = 64
NUM_LAYERS = 2
BATCH_SIZE = 32
EPOCHS = 5
LR = 2e-3


class TicketDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        first_filler = 1 + NUM_CLASSES * KEYWORDS_PER_CLASS
        for _ in range(n):
            label = int(torch.randint(NUM_CLASSES, (1,), generator=g))
            length = int(torch.randint(8, 25, (1,), generator=g))
            tokens = torch.randint(first_filler, VOCAB_SIZE, (length,), generator=g)
            n_kw = int(torch.randint(1, 4, (1,), generator=g))
            pos = torch.randperm(length, generator=g)[:n_kw]
            kw = 1 + label * KEYWORDS_PER_CLASS + torch.randint(KEYWORDS_PER_CLASS, (n_kw,), generator=g)
            tokens[pos] = kw
            self.samples.append((tokens, label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


def collate(batch):
    lengths = torch.tensor([len(t) for t, _ in batch])
    src = torch.full((len(batch), int(lengths.max())), PAD, dtype=torch.long)
    for i, (t, _) in enumerate(batch):
        src[i, :len(t)] = t
    labels = torch.tensor([y for _, y in batch])
    return src, lengths, labels


class LSTMEncoder(nn.Module):
    def __init__(self, num_embeddings, embed_dim, hidden_size, num_layers, dropout_in=0.1, bidirectional=True):
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.embed_tokens = nn.Embedding(num_embeddings, embed_dim, padding_idx=PAD)
        self.dropout_in = dropout_in
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, bidirectional=bidirectional)
        self.output_units = hidden_size * 2 if bidirectional else hidden_size

    def forward(self, src_tokens, src_lengths):
        bsz, seqlen = src_tokens.size()
        x = self.embed_tokens(src_tokens)
        x = F.dropout(x, p=self.dropout_in, training=self.training)
        x = x.transpose(0, 1)
        packed_x = nn.utils.rnn.pack_padded_sequence(x, src_lengths, enforce_sorted=False)
        packed_outs, (final_hiddens, final_cells) = self.lstm(packed_x)
        x, _ = nn.utils.rnn.pad_packed_sequence(packed_outs, padding_value=0.0)

        if self.bidirectional:
            def combine_bidir(outs):
                return torch.cat([
                    torch.cat([outs[2 * i], outs[2 * i + 1]], dim=0).view(1, bsz, self.output_units)
                    for i in range(self.num_layers)
                ], dim=0)

            final_hiddens = combine_bidir(final_hiddens)
            final_cells = combine_bidir(final_cells)
        return x, final_hiddens, final_cells


class TicketClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = LSTMEncoder(VOCAB_SIZE, EMBED_DIM, HIDDEN_SIZE, NUM_LAYERS)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(self.encoder.output_units, NUM_CLASSES)

    def forward(self, src_tokens, src_lengths):
        _, final_hiddens, _ = self.encoder(src_tokens, src_lengths)
        return self.classifier(self.dropout(final_hiddens[-1]))


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for src, lengths, labels in loader:
            correct += (model(src, lengths).argmax(1) == labels).sum().item()
            total += len(labels)
    model.train()
    return correct / total


train_loader = DataLoader(TicketDataset(1280, seed=1), batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate)
valid_loader = DataLoader(TicketDataset(512, seed=2), batch_size=BATCH_SIZE, collate_fn=collate)

model = TicketClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
criterion = nn.CrossEntropyLoss()

t0 = time.time()
for epoch in range(EPOCHS):
    total_loss, correct, seen = 0.0, 0, 0
    for src, lengths, labels in train_loader:
        optimizer.zero_grad()
        logits = model(src, lengths)
        loss = criterion(logits, labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total_loss += loss.item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    print("epoch {}  train loss {:.4f}  train acc {:.3f}  valid acc {:.3f}  ({:.1f}s)".format(
        epoch + 1, total_loss / seen, correct / seen, evaluate(model, valid_loader), time.time() - t0))
