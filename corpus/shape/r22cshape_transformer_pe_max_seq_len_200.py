"""Transformer seq2seq (after SamLynnEvans/Transformer) on a toy "transliteration" corpus.

Source sentences are token sequences of varying length; the target is the source with every
token mapped through a fixed substitution table. Embedder + sinusoidal
PositionalEncoder, a 2-layer encoder and decoder, Adam with the paper's betas, batches of
sentences bucketed by length like torchtext's BucketIterator. Sentences longer than max_strlen
are dropped when the dataset is built.
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)


class Opt:
    d_model = 64
    n_layers = 2
    heads = 4
    dropout = 0.1
    batchsize = 16
    lr = 2e-3
    epochs = 3
    max_strlen = 250
    printevery = 20


opt = Opt()

PAD, SOS, EOS = 0, 1, 2
VOCAB = 40
N_SENTENCES = 640


def make_corpus(n):
    g = torch.Generator().manual_seed(1)
    table = torch.randperm(VOCAB - 3, generator=g) + 3
    pairs = []
    for _ in range(n):
        # mostly short sentences, a long tail of paragraphs
        if random.random() < 0.04:
            length = random.randint(150, 260)
        else:
            length = int(min(260, 4 + random.expovariate(1 / 18)))
        src = torch.randint(3, VOCAB, (length,), generator=g)
        trg = table[src - 3]
        pairs.append((src, trg))
    return pairs


def read_data(pairs):
    return [(s, t) for s, t in pairs if len(s) <= opt.max_strlen and len(t) <= opt.max_strlen]


def create_batches(pairs, batchsize):
    pairs = sorted(pairs, key=lambda p: len(p[0]))
    batches = [pairs[i:i + batchsize] for i in range(0, len(pairs), batchsize)]
    random.shuffle(batches)
    for batch in batches:
        src_len = max(len(s) for s, _ in batch)
        trg_len = max(len(t) for _, t in batch) + 2
        src = torch.full((len(batch), src_len), PAD, dtype=torch.long)
        trg = torch.full((len(batch), trg_len), PAD, dtype=torch.long)
        for i, (s, t) in enumerate(batch):
            src[i, :len(s)] = s
            trg[i, 0] = SOS
            trg[i, 1:len(t) + 1] = t
            trg[i, len(t) + 1] = EOS
        yield src, trg


class Embedder(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)

    def forward(self, x):
        return self.embed(x)


class PositionalEncoder(nn.Module):
    def __init__(self, d_model, max_seq_len=200, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_seq_len, d_model)
        for pos in range(max_seq_len):
            for i in range(0, d_model, 2):
                pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))
                pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x * math.sqrt(self.d_model)
        seq_len = x.size(1)
        pe = self.pe[:, :seq_len]
        x = x + pe
        return self.dropout(x)


class Encoder(nn.Module):
    def __init__(self, vocab_size, d_model, N, heads, dropout):
        super().__init__()
        self.embed = Embedder(vocab_size, d_model)
        self.pe = PositionalEncoder(d_model, dropout=dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, N)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, src, src_pad):
        x = self.embed(src)
        x = self.pe(x)
        return self.norm(self.layers(x, src_key_padding_mask=src_pad))


class Decoder(nn.Module):
    def __init__(self, vocab_size, d_model, N, heads, dropout):
        super().__init__()
        self.embed = Embedder(vocab_size, d_model)
        self.pe = PositionalEncoder(d_model, dropout=dropout)
        layer = nn.TransformerDecoderLayer(d_model, heads, 4 * d_model, dropout, batch_first=True)
        self.layers = nn.TransformerDecoder(layer, N)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, trg, e_outputs, src_pad, trg_mask, trg_pad):
        x = self.embed(trg)
        x = self.pe(x)
        x = self.layers(x, e_outputs, tgt_mask=trg_mask, tgt_key_padding_mask=trg_pad,
                        memory_key_padding_mask=src_pad)
        return self.norm(x)


class Transformer(nn.Module):
    def __init__(self, src_vocab, trg_vocab, d_model, N, heads, dropout):
        super().__init__()
        self.encoder = Encoder(src_vocab, d_model, N, heads, dropout)
        self.decoder = Decoder(trg_vocab, d_model, N, heads, dropout)
        self.out = nn.Linear(d_model, trg_vocab)

    def forward(self, src, trg, src_pad, trg_mask, trg_pad):
        e_outputs = self.encoder(src, src_pad)
        d_output = self.decoder(trg, e_outputs, src_pad, trg_mask, trg_pad)
        return self.out(d_output)


def create_masks(src, trg_input):
    src_pad = src == PAD
    trg_pad = trg_input == PAD
    size = trg_input.size(1)
    nopeak = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    return src_pad, nopeak, trg_pad


def train_model(model, optimizer, train_pairs):
    model.train()
    step = 0
    for epoch in range(opt.epochs):
        total_loss = 0.0
        n = 0
        for src, trg in create_batches(train_pairs, opt.batchsize):
            trg_input = trg[:, :-1]
            ys = trg[:, 1:].contiguous().view(-1)
            src_pad, trg_mask, trg_pad = create_masks(src, trg_input)
            preds = model(src, trg_input, src_pad, trg_mask, trg_pad)
            optimizer.zero_grad()
            loss = F.cross_entropy(preds.view(-1, preds.size(-1)), ys, ignore_index=PAD)
            loss.backward()
            optimizer.step()
            step += 1
            total_loss += loss.item()
            n += 1
            if step % opt.printevery == 0:
                print(f"epoch {epoch + 1} step {step:4d}  loss = {total_loss / n:.3f}  "
                      f"(src len {src.size(1)})")
        print(f"epoch {epoch + 1} complete, avg loss = {total_loss / n:.3f}")


pairs = make_corpus(N_SENTENCES)
train_pairs = read_data(pairs)
print(f"{len(train_pairs)} sentence pairs (max_strlen {opt.max_strlen}), "
      f"longest {max(len(s) for s, _ in train_pairs)} tokens")
model = Transformer(VOCAB, VOCAB, opt.d_model, opt.n_layers, opt.heads, opt.dropout)
for p in model.parameters():
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr, betas=(0.9, 0.98), eps=1e-9)
train_model(model, optimizer, train_pairs)
