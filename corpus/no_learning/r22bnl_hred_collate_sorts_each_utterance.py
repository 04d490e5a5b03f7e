"""HRED (hierarchical recurrent encoder-decoder) on dialogue triples (u1, u2, u3).

A shared utterance GRU encodes u1 and u2, a session GRU runs over the two utterance vectors,
and a GRU decoder generates the response u3 from the session state (teacher forcing).
Data: generated "MovieTriples"-style triples over a small word vocabulary; the answer u3
repeats the last words of the first turn in another register, most recent word first.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(123)
np.random.seed(123)

N_WORDS = 36
BOS, EOS = 1, 2
WORD0 = 3
VOCAB = WORD0 + N_WORDS
PAD = VOCAB
EMB, HID, SES = 48, 128, 128
BT_SIZ = 32
EPOCHS = 4


def make_triples(n, rng):
    register = rng.permutation(N_WORDS)
    triples = []
    for _ in range(n):
        u1 = rng.integers(0, N_WORDS, size=rng.integers(4, 9))
        u2 = rng.integers(0, N_WORDS, size=rng.integers(3, 9))
        k = rng.integers(2, 5)
        u3 = register[u1[::-1][:k]]
        triples.append(([int(w) + WORD0 for w in u1] + [EOS],
                        [int(w) + WORD0 for w in u2] + [EOS],
                        [int(w) + WORD0 for w in u3] + [EOS]))
    return triples


class DialogTurn:
    def __init__(self, item):
        self.u1, self.u2, self.u3 = item

    def __len__(self):
        return len(self.u1) + len(self.u2) + len(self.u3)


class MovieTriples(Dataset):
    def __init__(self, triples):
        self.utterance_data = [DialogTurn(t) for t in triples]

    def __len__(self):
        return len(self.utterance_data)

    def __getitem__(self, idx):
        dialog = self.utterance_data[idx]
        return dialog, len(dialog.u1), len(dialog.u2), len(dialog.u3)


def custom_collate_fn(batch):
    bt_siz = len(batch)
    u1_batch, u2_batch, u3_batch = [], [], []
    u1_lens, u2_lens, u3_lens = np.zeros(bt_siz, dtype=int), np.zeros(bt_siz, dtype=int), np.zeros(bt_siz, dtype=int)

    l_u1, l_u2, l_u3 = 0, 0, 0
    for i, (d, cl_u1, cl_u2, cl_u3) in enumerate(batch):
        l_u1, l_u2, l_u3 = max(l_u1, cl_u1), max(l_u2, cl_u2), max(l_u3, cl_u3)
        u1_batch.append(torch.LongTensor(d.u1))
        u2_batch.append(torch.LongTensor(d.u2))
        u3_batch.append(torch.LongTensor(d.u3))
        u1_lens[i], u2_lens[i], u3_lens[i] = cl_u1, cl_u2, cl_u3

    t1, t2, t3 = u1_batch, u2_batch, u3_batch
    u1_batch = torch.full((bt_siz, l_u1), PAD, dtype=torch.long)
    u2_batch = torch.full((bt_siz, l_u2), PAD, dtype=torch.long)
    u3_batch = torch.full((bt_siz, l_u3), PAD, dtype=torch.long)
    for i in range(bt_siz):
        u1_batch[i, :t1[i].size(0)] = t1[i]
        u2_batch[i, :t2[i].size(0)] = t2[i]
        u3_batch[i, :t3[i].size(0)] = t3[i]

    sort1, sort2, sort3 = np.argsort(u1_lens * -1), np.argsort(u2_lens * -1), np.argsort(u3_lens * -1)

    return (u1_batch[sort1, :], u1_lens[sort1].tolist(), u2_batch[sort2, :], u2_lens[sort2].tolist(),
            u3_batch[sort3, :], u3_lens[sort3].tolist())


class BaseEncoder(nn.Module):
    def __init__(self, vocab_size, emb_size, hid_size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size + 1, emb_size, padding_idx=PAD)
        self.rnn = nn.GRU(emb_size, hid_size, batch_first=True)

    def forward(self, x, x_lens):
        emb = self.embed(x)
        packed = pack_padded_sequence(emb, x_lens, batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        return h[-1].unsqueeze(1)


class SessionEncoder(nn.Module):
    def __init__(self, inp_size, hid_size):
        super().__init__()
        self.rnn = nn.GRU(inp_size, hid_size, batch_first=True)

    def forward(self, x):
        _, h = self.rnn(x)
        return h[-1]


class Decoder(nn.Module):
    def __init__(self, vocab_size, emb_size, ses_size, hid_size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size + 1, emb_size, padding_idx=PAD)
        self.ses_to_dec = nn.Linear(ses_size, hid_size)
        self.rnn = nn.GRU(emb_size, hid_size, batch_first=True)
        self.out = nn.Linear(hid_size, vocab_size)

    def forward(self, ses_encoding, x, x_lens):
        h0 = torch.tanh(self.ses_to_dec(ses_encoding)).unsqueeze(0)
        bos = torch.full((x.size(0), 1), BOS, dtype=torch.long)
        dec_in = torch.cat([bos, x[:, :-1]], dim=1)
        dec_in = dec_in.masked_fill(dec_in == PAD, EOS)
        dec_o, _ = self.rnn(self.embed(dec_in), h0)
        return self.out(dec_o)


def run_batch(sample_batch, base_enc, ses_enc, dec):
    u1, u1_lens, u2, u2_lens, u3, u3_lens = sample_batch
    o1, o2 = base_enc(u1, u1_lens), base_enc(u2, u2_lens)
    qu_seq = torch.cat((o1, o2), 1)
    final_session_o = ses_enc(qu_seq)
    logits = dec(final_session_o, u3, u3_lens)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), u3.reshape(-1), ignore_index=PAD)
    return loss, logits, u3


def calc_valid_loss(valid_dataloader, base_enc, ses_enc, dec):
    base_enc.eval()
    ses_enc.eval()
    dec.eval()
    valid_loss, n_correct, n_words = 0.0, 0, 0
    with torch.no_grad():
        for i_batch, sample_batch in enumerate(valid_dataloader):
            loss, logits, u3 = run_batch(sample_batch, base_enc, ses_enc, dec)
            valid_loss += loss.item()
            is_word = u3 >= WORD0
            n_correct += ((logits.argmax(-1) == u3) & is_word).sum().item()
            n_words += is_word.sum().item()
    base_enc.train()
    ses_enc.train()
    dec.train()
    return valid_loss / (1 + i_batch), n_correct / n_words


def train(base_enc, ses_enc, dec):
    rng = np.random.default_rng(0)
    triples = make_triples(1920, rng)
    train_dataset, valid_dataset = MovieTriples(triples[:1600]), MovieTriples(triples[1600:])
    print('training set size', len(train_dataset))
    train_dataloader = DataLoader(train_dataset, batch_size=BT_SIZ, shuffle=True, collate_fn=custom_collate_fn)
    valid_dataloader = DataLoader(valid_dataset, batch_size=BT_SIZ, shuffle=False, collate_fn=custom_collate_fn)

    all_params = list(base_enc.parameters()) + list(ses_enc.parameters()) + list(dec.parameters())
    optimizer = torch.optim.Adam(all_params, lr=3e-3)
    for i in range(EPOCHS):
        tr_loss = 0.0
        strt = time.time()
        for i_batch, sample_batch in enumerate(train_dataloader):
            loss, _, _ = run_batch(sample_batch, base_enc, ses_enc, dec)
            tr_loss += loss.item()

            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(all_params, 5.0)
            optimizer.step()
            if i_batch % 10 == 0:
                print('epoch {} batch {} loss {:.4f}'.format(i + 1, i_batch, loss.item()))

        vl_loss, vl_acc = calc_valid_loss(valid_dataloader, base_enc, ses_enc, dec)
        print("Training loss {:.4f} Valid loss {:.4f} Valid word acc {:.3f}".format(tr_loss / (1 + i_batch), vl_loss, vl_acc))
        print("epoch {} took {:.1f}s".format(i + 1, time.time() - strt))


def main():
    base_enc = BaseEncoder(VOCAB, EMB, HID)
    ses_enc = SessionEncoder(HID, SES)
    dec = Decoder(VOCAB, EMB, SES, HID)
    train(base_enc, ses_enc, dec)


if __name__ == '__main__':
    main()
