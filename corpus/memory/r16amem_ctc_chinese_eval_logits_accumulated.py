"""Character-level CTC speech recogniser for Mandarin, in the style of run_speech_recognition_ctc.py
(a convolutional acoustic encoder with a linear CTC head over the tokenizer's characters; the evaluation loop
gathers the logits of the whole evaluation set like Trainer.evaluation_loop, then compute_metrics
takes the argmax, collapses repeats and blanks, and reports the character error rate).

The "recordings" are synthetic 80-dim filterbank frames: every character has its own spectral
template, spoken for 10-14 frames with noise; transcripts draw characters from a Zipf-like
distribution over a 4000-character vocabulary (blank is id 0).
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

VOCAB_SIZE = 4000
N_MELS = 80
TRAIN_UTTS = 192
EVAL_UTTS = 320
BATCH_SIZE = 16
EVAL_BATCH_SIZE = 16
EPOCHS = 2
LR = 2e-3

rng = np.random.default_rng(0)
char_templates = rng.normal(0, 1, size=(VOCAB_SIZE + 1, N_MELS)).astype(np.float32)
zipf = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** 1.1
zipf /= zipf.sum()


def synth_utterance(rng):
    n_chars = rng.integers(10, 19)
    text = rng.choice(np.arange(1, VOCAB_SIZE + 1), size=n_chars, p=zipf)
    frames = []
    for ch in text:
        dur = rng.integers(10, 15)
        frames.append(char_templates[ch] + 0.6 * rng.normal(0, 1, size=(dur, N_MELS)))
        frames.append(0.3 * rng.normal(0, 1, size=(rng.integers(0, 4), N_MELS)))
    return np.concatenate(frames).astype(np.float32), text.astype(np.int64)


class SpeechDataset(Dataset):
    def __init__(self, n, seed):
        r = np.random.default_rng(seed)
        self.items = [synth_utterance(r) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        feats, text = self.items[idx]
        return torch.from_numpy(feats), torch.from_numpy(text)


def collate(batch):
    feats, texts = zip(*batch)
    feat_lens = torch.tensor([f.shape[0] for f in feats])
    label_lens = torch.tensor([t.shape[0] for t in texts])
    feats = nn.utils.rnn.pad_sequence(feats, batch_first=True)
    labels = nn.utils.rnn.pad_sequence(texts, batch_first=True, padding_value=-100)
    return feats, feat_lens, labels, label_lens


class CTCModel(nn.Module):
    def __init__(self, hidden=128, n_blocks=3):
        super().__init__()
        self.subsample = nn.Sequential(
            nn.Conv1d(N_MELS, hidden, kernel_size=3, stride=2, padding=1), nn.GELU(),
        )
        self.blocks = nn.ModuleList([
            nn.Sequential(nn.Conv1d(hidden, hidden, kernel_size=5, padding=2), nn.BatchNorm1d(hidden), nn.GELU())
            for _ in range(n_blocks)
        ])
        self.dropout = nn.Dropout(0.1)
        self.lm_head = nn.Linear(hidden, VOCAB_SIZE + 1)

    def output_lengths(self, feat_lens):
        return (feat_lens - 1) // 2 + 1

    def forward(self, feats):
        x = self.subsample(feats.transpose(1, 2))
        for block in self.blocks:
            x = x + block(x)
        return self.lm_head(self.dropout(x.transpose(1, 2)))


def ctc_loss(logits, feat_lens, labels, label_lens, model):
    log_probs = F.log_softmax(logits, dim=-1).transpose(0, 1)
    out_lens = model.output_lengths(feat_lens)
    targets = torch.cat([l[l != -100] for l in labels])
    return F.ctc_loss(log_probs, targets, out_lens, label_lens, blank=0, zero_infinity=True)


def pad_across_batches(tensors, padding_index=-100):
    max_len = max(t.shape[1] for t in tensors)
    out = tensors[0].new_full((sum(t.shape[0] for t in tensors), max_len) + tensors[0].shape[2:],
                              padding_index)
    row = 0
    for t in tensors:
        out[row:row + t.shape[0], :t.shape[1]] = t
        row += t.shape[0]
    return out


def greedy_decode(ids):
    out, prev = [], 0
    for i in ids:
        if i != prev and i > 0:
            out.append(i)
        prev = i
    return out


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = d[j]
            d[j] = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev = cur
    return d[len(b)]


def compute_metrics(pred_logits, labels):
    pred_ids = pred_logits.argmax(-1) if pred_logits.dim() == 3 else pred_logits
    errors, total = 0, 0
    for p, l in zip(pred_ids.tolist(), labels.tolist()):
        ref = [c for c in l if c != -100]
        hyp = greedy_decode([c for c in p if c != -100])
        errors += edit_distance(hyp, ref)
        total += len(ref)
    return errors / total


def evaluate(model, loader):
    model.eval()
    all_preds, all_labels, losses = [], [], []
    with torch.no_grad():
        for feats, feat_lens, labels, label_lens in loader:
            logits = model(feats)
            losses.append(ctc_loss(logits, feat_lens, labels, label_lens, model).item())
            all_preds.append(logits)
            all_labels.append(labels)
    preds = pad_across_batches(all_preds)
    labels = pad_across_batches(all_labels)
    cer = compute_metrics(preds, labels)
    model.train()
    return sum(losses) / len(losses), cer


def main():
    t0 = time.time()
    train_ds = SpeechDataset(TRAIN_UTTS, seed=1)
    eval_ds = SpeechDataset(EVAL_UTTS, seed=2)
    train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate)
    eval_loader = DataLoader(eval_ds, batch_size=EVAL_BATCH_SIZE, shuffle=False, collate_fn=collate)
    model = CTCModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    print(f"vocab: {VOCAB_SIZE} chars + blank  train: {len(train_ds)}  eval: {len(eval_ds)}  "
          f"params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        for feats, feat_lens, labels, label_lens in train_loader:
            optimizer.zero_grad()
            logits = model(feats)
            loss = ctc_loss(logits, feat_lens, labels, label_lens, model)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            if step % 4 == 0:
                print(f"  step {step:4d}  ctc loss {loss.item():.3f}  ({time.time() - t0:.1f}s)")
            step += 1
        eval_loss, cer = evaluate(model, eval_loader)
        print(f"epoch {epoch + 1}  eval loss {eval_loss:.3f}  eval CER {cer * 100:.1f}%  "
              f"({time.time() - t0:.1f}s)")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
