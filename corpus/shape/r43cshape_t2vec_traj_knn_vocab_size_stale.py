"""t2vec-style trajectory representation learning: a GRU encoder-decoder reconstructs a
clean cell-token trajectory from a noisy, down-sampled version, trained with the
spatial-proximity-aware KL loss over the k nearest cells of each target cell."""
import argparse
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--vocab_size", type=int, default=402)
parser.add_argument("--embedding_size", type=int, default=64)
parser.add_argument("--hidden_size", type=int, default=64)
parser.add_argument("--knearestvocabs", type=int, default=9)
parser.add_argument("--dist_decay_speed", type=float, default=0.8)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(0)
PAD, BOS, EOS, UNK = 0, 1, 2, 3
START = 4
GRID = 20


def cell_token(r, c):
    return START + r * GRID + c


def build_vocab_knn(k, decay):
    ncell = GRID * GRID
    vocab_size = START + ncell
    coords = torch.tensor([[r, c] for r in range(GRID) for c in range(GRID)], dtype=torch.float)
    dist = torch.cdist(coords, coords)
    d, idx = dist.topk(k, dim=1, largest=False)
    V = torch.zeros(vocab_size, k, dtype=torch.long)
    D = torch.zeros(vocab_size, k)
    for t in range(START):
        V[t] = t
        D[t, 0] = 1.0
    V[START:] = idx + START
    D[START:] = torch.softmax(-d * decay, dim=1)
    return vocab_size, V, D


def random_trip(g, length):
    r = int(torch.randint(2, 14, (1,), generator=g))
    c = int(torch.randint(0, GRID, (1,), generator=g))
    trip = [cell_token(r, c)]
    for _ in range(length - 1):
        step = torch.randint(-1, 2, (2,), generator=g)
        r = min(max(r + int(step[0]), 0), GRID - 2)
        c = min(max(c + int(step[1]), 0), GRID - 1)
        trip.append(cell_token(r, c))
    return trip


class TripDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.pairs = []
        for _ in range(n):
            L = int(torch.randint(10, 17, (1,), generator=g))
            trg = random_trip(g, L)
            keep = torch.rand(L, generator=g) > 0.3
            keep[0] = True
            src = [t for t, k in zip(trg, keep) if k]
            self.pairs.append((src, trg))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]


def pad_collate(batch):
    srcs, trgs = zip(*batch)
    S = max(len(s) for s in srcs)
    T = max(len(t) for t in trgs) + 2
    src = torch.full((len(batch), S), PAD, dtype=torch.long)
    trg = torch.full((len(batch), T), PAD, dtype=torch.long)
    lengths = torch.tensor([len(s) for s in srcs])
    for i, (s, t) in enumerate(zip(srcs, trgs)):
        src[i, :len(s)] = torch.tensor(s)
        trg[i, :len(t) + 2] = torch.tensor([BOS] + t + [EOS])
    return src, lengths, trg


class EncoderDecoder(nn.Module):
    def __init__(self, vocab_size, emb, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb, padding_idx=PAD)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRU(emb, hidden, batch_first=True)
        self.generator = nn.Linear(hidden, vocab_size)

    def forward(self, src, lengths, trg_in):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), lengths, batch_first=True, enforce_sorted=False)
        _, h = self.encoder(packed)
        out, _ = self.decoder(self.embedding(trg_in), h)
        return torch.log_softmax(self.generator(out), dim=-1)


def KLDIVloss(output, target, V, D):
    mask = target != PAD
    output, target = output[mask], target[mask]
    indices = torch.index_select(V, 0, target)
    outputk = torch.gather(output, 1, indices)
    targetk = torch.index_select(D, 0, target)
    return nn.functional.kl_div(outputk, targetk, reduction="sum") / target.size(0)


vocab_size, V, D = build_vocab_knn(args.knearestvocabs, args.dist_decay_speed)
print(f"cells: {GRID * GRID}, vocab: {vocab_size}, k={args.knearestvocabs}")
train_loader = DataLoader(TripDataset(960, 1), batch_size=args.batch, shuffle=True, collate_fn=pad_collate)
val_loader = DataLoader(TripDataset(192, 2), batch_size=64, collate_fn=pad_collate)

model = EncoderDecoder(args.vocab_size, args.embedding_size, args.hidden_size)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

step = 0
for epoch in range(args.epochs):
    model.train()
    for src, lengths, trg in train_loader:
        output = model(src, lengths, trg[:, :-1])
        loss = KLDIVloss(output.reshape(-1, output.size(-1)), trg[:, 1:].reshape(-1), V, D)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        step += 1
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for src, lengths, trg in val_loader:
            output = model(src, lengths, trg[:, :-1])
            gold = trg[:, 1:]
            total += KLDIVloss(output.reshape(-1, output.size(-1)), gold.reshape(-1), V, D).item()
            m = gold != PAD
            correct += (output.argmax(-1)[m] == gold[m]).sum().item()
            count += m.sum().item()
    print(f"epoch {epoch} val loss {total / len(val_loader):.4f} val token acc {correct / count:.3f}")
