"""Frame-level acoustic model in the pytorch-kaldi style: a 2-layer ReLU RNN (orthogonal
recurrent init) over 40-dim fbank features with per-speaker CMVN, trained with frame-level
cross-entropy on tied-state (pdf) labels from a forced alignment.

Utterances are sorted by length and fed in increasing order, as pytorch-kaldi does.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1234)
np.random.seed(1234)

N_FEATS = 40
N_PDFS = 48
HIDDEN = 64
N_LAYERS = 2
BATCH_SIZE = 8
N_EPOCHS = 8
LR = 0.003


def make_corpus(n_utts, rng):
    """Synthetic fbank utterances: every pdf has a spectral template, states last a few frames,
    and the features are mean/variance normalised per utterance (CMVN)."""
    templates = rng.normal(0.0, 1.0, size=(N_PDFS, N_FEATS))
    utts = []
    for _ in range(n_utts):
        n_frames = int(np.clip(rng.lognormal(4.6, 0.6), 30, 600))
        ali = []
        while len(ali) < n_frames:
            ali += [int(rng.integers(N_PDFS))] * int(rng.integers(3, 12))
        ali = np.array(ali[:n_frames])
        feats = templates[ali] + 0.8 * rng.normal(size=(n_frames, N_FEATS))
        feats = (feats - feats.mean(0)) / feats.std(0)
        utts.append((feats.astype(np.float32), ali))
    return utts


class FbankUtterances(Dataset):
    def __init__(self, utts):
        self.utts = sorted(utts, key=lambda u: len(u[1]))

    def __len__(self):
        return len(self.utts)

    def __getitem__(self, i):
        feats, ali = self.utts[i]
        return torch.from_numpy(feats), torch.from_numpy(ali)


def collate(batch):
    feats, ali = zip(*batch)
    x = nn.utils.rnn.pad_sequence(feats)
    y = nn.utils.rnn.pad_sequence(ali, padding_value=-100)
    return x, y


class RNNAcousticModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(N_FEATS, HIDDEN, num_layers=N_LAYERS, nonlinearity="relu")
        self.out = nn.Linear(HIDDEN, N_PDFS)
        for name, p in self.rnn.named_parameters():
            if name.startswith("weight_hh"):
                nn.init.orthogonal_(p)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.out(h)


def main():
    rng = np.random.default_rng(0)
    train_set = FbankUtterances(make_corpus(160, rng))
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=False, collate_fn=collate)

    model = RNNAcousticModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    step = 0
    t0 = time.time()
    for ep in range(N_EPOCHS):
        model.train()
        tot_loss, tot_err, n_frames = 0.0, 0, 0
        for x, y in loader:
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, N_PDFS), y.reshape(-1), ignore_index=-100, reduction="sum") / x.shape[1]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1

            mask = y != -100
            tot_loss += F.cross_entropy(out[mask], y[mask], reduction="sum").item()
            tot_err += (out.argmax(-1)[mask] != y[mask]).sum().item()
            n_frames += mask.sum().item()
            if step % 5 == 0:
                print(f"ep={ep:02d} step={step:4d} max_len={x.shape[0]:3d} loss={loss.item():.3f}")
        print(f"ep={ep:02d} tr_loss={tot_loss / n_frames:.3f} tr_err={tot_err / n_frames:.3f} time(s)={time.time() - t0:.1f}")


if __name__ == "__main__":
    main()
