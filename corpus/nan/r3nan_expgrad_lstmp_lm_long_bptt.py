"""Word-level language model with a projected LSTM (LSTMP) trained with truncated BPTT on
long windows. Corpus: synthetic token stream from a sparse Markov chain (stands in for the
speech transcripts used in the real project).
"""
import bisect

import torch
import torch.nn as nn

torch.manual_seed(0)

VOCAB = 50
BATCH_SIZE = 20
BPTT = 100
EMB = 64
HIDDEN = 128
PROJ = 64
LR = 20.0
EPOCHS = 2


def make_corpus(n_tokens=40000):
    g = torch.Generator().manual_seed(0)
    trans = torch.softmax(torch.randn(VOCAB, VOCAB, generator=g) * 3, dim=1)
    cum = trans.cumsum(dim=1).tolist()
    u = torch.rand(n_tokens, generator=g).tolist()
    tokens = [0]
    for r in u:
        tokens.append(min(bisect.bisect(cum[tokens[-1]], r), VOCAB - 1))
    return torch.tensor(tokens)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, nbatch)


def get_batch(source, i):
    seq_len = min(BPTT, source.size(1) - 1 - i)
    return source[:, i:i + seq_len], source[:, i + 1:i + 1 + seq_len]


class LSTMPLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTM(EMB, HIDDEN, num_layers=2, proj_size=PROJ, batch_first=True)
        self.decoder = nn.Linear(PROJ, VOCAB)

    def forward(self, x, hidden=None):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


def repackage_hidden(h):
    return tuple(t.detach() for t in h)


train_data = batchify(make_corpus(), BATCH_SIZE)
model = LSTMPLanguageModel()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)

step = 0
for epoch in range(1, EPOCHS + 1):
    model.train()
    hidden = None
    total_loss = 0.0
    for batch, i in enumerate(range(0, train_data.size(1) - 1, BPTT)):
        data, targets = get_batch(train_data, i)
        if hidden is not None:
            hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output.reshape(-1, VOCAB), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        step += 1
        if batch % 5 == 0:
            print(f"| epoch {epoch} | batch {batch:3d} | lr {LR:.1f} | loss {loss.item():8.3f}")
    print(f"| end of epoch {epoch} | mean train loss {total_loss / (batch + 1):.3f}")
