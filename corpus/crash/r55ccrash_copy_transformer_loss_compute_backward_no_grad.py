"""Annotated-Transformer style copy task: a small encoder-decoder learns to copy
random symbol sequences. Greedy-decodes one example at the end."""
import copy
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

V = 11
N_LAYERS = 2
D_MODEL = 32
D_FF = 64
HEADS = 4
SEQ_LEN = 10


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, N=2, d_model=32, d_ff=64, h=4, dropout=0.1):
        super().__init__()
        enc_layer = nn.TransformerEncoderLayer(d_model, h, d_ff, dropout, batch_first=True)
        dec_layer = nn.TransformerDecoderLayer(d_model, h, d_ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, N)
        self.decoder = nn.TransformerDecoder(dec_layer, N)
        pos = PositionalEncoding(d_model, dropout)
        self.src_embed = nn.Sequential(Embeddings(d_model, src_vocab), pos)
        self.tgt_embed = nn.Sequential(Embeddings(d_model, tgt_vocab), copy.deepcopy(pos))
        self.generator = Generator(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src):
        return self.encoder(self.src_embed(src))

    def decode(self, memory, tgt):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        return self.decoder(self.tgt_embed(tgt), memory, tgt_mask=tgt_mask)

    def forward(self, src, tgt):
        return self.decode(self.encode(src), tgt)


class Batch:
    def __init__(self, src, tgt):
        self.src = src
        self.tgt = tgt[:, :-1]
        self.tgt_y = tgt[:, 1:]
        self.ntokens = self.tgt_y.numel()


def data_gen(V, batch_size, nbatches):
    for _ in range(nbatches):
        data = torch.randint(1, V, size=(batch_size, SEQ_LEN))
        data[:, 0] = 1
        yield Batch(data.clone(), data.clone())


class NoamOpt:
    def __init__(self, model_size, factor, warmup, optimizer):
        self.optimizer = optimizer
        self._step = 0
        self.warmup = warmup
        self.factor = factor
        self.model_size = model_size

    def step(self):
        self._step += 1
        rate = self.rate()
        for p in self.optimizer.param_groups:
            p["lr"] = rate
        self.optimizer.step()

    def rate(self, step=None):
        if step is None:
            step = self._step
        return self.factor * (self.model_size ** (-0.5) * min(step ** (-0.5), step * self.warmup ** (-1.5)))


class SimpleLossCompute:
    def __init__(self, generator, criterion, opt=None):
        self.generator = generator
        self.criterion = criterion
        self.opt = opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.optimizer.zero_grad()
        return loss.item() * norm


def run_epoch(data_iter, model, loss_compute):
    start = time.time()
    total_tokens = 0
    total_loss = 0.0
    for i, batch in enumerate(data_iter):
        out = model(batch.src, batch.tgt)
        loss = loss_compute(out, batch.tgt_y, batch.ntokens)
        total_loss += loss
        total_tokens += batch.ntokens
        if i % 10 == 1:
            print("  step %d loss %.4f (%.2fs)" % (i, loss / batch.ntokens, time.time() - start))
    return total_loss / total_tokens


def greedy_decode(model, src, max_len, start_symbol):
    memory = model.encode(src)
    ys = torch.ones(1, 1).fill_(start_symbol).long()
    for _ in range(max_len - 1):
        out = model.decode(memory, ys)
        prob = model.generator(out[:, -1])
        next_word = prob.argmax(dim=1).item()
        ys = torch.cat([ys, torch.ones(1, 1).long().fill_(next_word)], dim=1)
    return ys


criterion = nn.NLLLoss(reduction="sum")
model = EncoderDecoder(V, V, N=N_LAYERS, d_model=D_MODEL, d_ff=D_FF, h=HEADS, dropout=0.1)
model_opt = NoamOpt(D_MODEL, 1, 100, torch.optim.Adam(model.parameters(), lr=0, betas=(0.9, 0.98), eps=1e-9))

for epoch in range(8):
    model.train()
    train_loss = run_epoch(data_gen(V, 30, 25), model, SimpleLossCompute(model.generator, criterion, model_opt))
    model.eval()
    with torch.no_grad():
        val_loss = run_epoch(data_gen(V, 30, 5), model, SimpleLossCompute(model.generator, criterion, None))
    print("epoch %d train loss %.4f val loss %.4f" % (epoch, train_loss, val_loss))

model.eval()
with torch.no_grad():
    src = torch.LongTensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
    print(greedy_decode(model, src, max_len=SEQ_LEN, start_symbol=1))
