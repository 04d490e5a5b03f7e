"""Attention-based GRU encoder-decoder (dl4mt session-2 style) on a toy translation task.

Source sentences are random word sequences; the "translation" maps every word through a fixed
bilingual dictionary and reverses the word order.  The cost is the per-sentence sum of the token
NLLs (as in dl4mt), averaged over the minibatch, trained with plain SGD.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)

SRC_VOCAB = 48
TRG_VOCAB = 48
PAD, BOS, EOS = 0, 1, 2
DIM_WORD = 32
DIM = 64
BATCH_SIZE = 32
MAXLEN = 20
N_TRAIN = 1024
MAX_EPOCHS = 4
LRATE = 1.0
CLIP_C = -1.0
DISP_FREQ = 4

dictionary = torch.randperm(TRG_VOCAB - 3)[: SRC_VOCAB - 3] + 3


def make_corpus(n):
    pairs = []
    for _ in range(n):
        length = random.randint(8, MAXLEN)
        src = [random.randint(3, SRC_VOCAB - 1) for _ in range(length)]
        trg = [int(dictionary[w - 3]) for w in reversed(src)]
        pairs.append((src + [EOS], trg + [EOS]))
    return pairs


def prepare_data(batch):
    lx = max(len(s) for s, _ in batch)
    ly = max(len(t) for _, t in batch)
    x = torch.full((len(batch), lx), PAD, dtype=torch.long)
    y = torch.full((len(batch), ly), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(batch):
        x[i, : len(s)] = torch.tensor(s)
        y[i, : len(t)] = torch.tensor(t)
    return x, (x != PAD).float(), y, (y != PAD).float()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(SRC_VOCAB, DIM_WORD, padding_idx=PAD)
        self.rnn = nn.GRU(DIM_WORD, DIM, batch_first=True, bidirectional=True)

    def forward(self, x):
        ctx, _ = self.rnn(self.emb(x))
        return ctx


class AttentionDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(TRG_VOCAB, DIM_WORD, padding_idx=PAD)
        self.init_state = nn.Linear(2 * DIM, DIM)
        self.att_ctx = nn.Linear(2 * DIM, DIM)
        self.att_state = nn.Linear(DIM, DIM, bias=False)
        self.att_v = nn.Linear(DIM, 1)
        self.cell = nn.GRUCell(DIM_WORD + 2 * DIM, DIM)
        self.ff_logit = nn.Linear(DIM + 2 * DIM + DIM_WORD, TRG_VOCAB)

    def forward(self, ctx, x_mask, y):
        ctx_mean = (ctx * x_mask[:, :, None]).sum(1) / x_mask.sum(1, keepdim=True)
        state = torch.tanh(self.init_state(ctx_mean))
        pctx = self.att_ctx(ctx)
        y_in = torch.cat([torch.full_like(y[:, :1], BOS), y[:, :-1]], 1)
        emb = self.emb(y_in)
        logits = []
        for t in range(y.size(1)):
            e = self.att_v(torch.tanh(pctx + self.att_state(state)[:, None])).squeeze(-1)
            e = e.masked_fill(x_mask == 0, -1e9)
            alpha = F.softmax(e, dim=1)
            context = (alpha[:, :, None] * ctx).sum(1)
            state = self.cell(torch.cat([emb[:, t], context], -1), state)
            logits.append(self.ff_logit(torch.cat([state, context, emb[:, t]], -1)))
        return torch.stack(logits, 1)


class NMT(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = AttentionDecoder()

    def forward(self, x, x_mask, y):
        return self.decoder(self.encoder(x), x_mask, y)


def sentence_cost(model, x, x_mask, y, y_mask):
    logits = model(x, x_mask, y)
    nll = F.cross_entropy(logits.reshape(-1, TRG_VOCAB), y.reshape(-1), reduction="none")
    cost = (nll.view_as(y_mask) * y_mask).sum(1)
    return cost


def main():
    train = make_corpus(N_TRAIN)
    valid = make_corpus(256)
    model = NMT()
    optimizer = torch.optim.SGD(model.parameters(), lr=LRATE)

    uidx = 0
    for eidx in range(MAX_EPOCHS):
        random.shuffle(train)
        for i in range(0, len(train), BATCH_SIZE):
            x, x_mask, y, y_mask = prepare_data(train[i: i + BATCH_SIZE])
            uidx += 1

            cost = sentence_cost(model, x, x_mask, y, y_mask).mean()
            optimizer.zero_grad()
            cost.backward()
            if CLIP_C > 0.0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_C)
            optimizer.step()

            if torch.isnan(cost) or torch.isinf(cost):
                print("NaN detected")

            if uidx % DISP_FREQ == 0:
                print(f"Epoch {eidx} Update {uidx} Cost {cost.item():.4f}")

        model.eval()
        with torch.no_grad():
            x, x_mask, y, y_mask = prepare_data(valid)
            valid_cost = sentence_cost(model, x, x_mask, y, y_mask).mean().item()
            acc = ((model(x, x_mask, y).argmax(-1) == y).float() * y_mask).sum() / y_mask.sum()
        model.train()
        print(f"Epoch {eidx} Valid {valid_cost:.4f} token_acc {acc.item():.3f}")


if __name__ == "__main__":
    main()
