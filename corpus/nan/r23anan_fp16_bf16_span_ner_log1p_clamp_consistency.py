"""Span-based NER (GLiNER-style boundary model) trained with bf16 mixed precision.

A BiLSTM encoder scores every span up to MAX_WIDTH tokens; a token head
predicts whether each token is inside an entity. Besides the span BCE and token BCE,
a marginal pair consistency loss ties them together: the probability that a token is
covered by at least one span, 1 - prod(1 - p_span), is pushed towards the token head.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB = 400
SEQ_LEN = 24
MAX_WIDTH = 4
D_MODEL = 64
BATCH_SIZE = 32
EPOCHS = 8
SPAN_POS_WEIGHT = torch.tensor(8.0)
CONSISTENCY_LOSS_WEIGHT = 0.1
AMP_DTYPE = torch.bfloat16


def all_spans(seq_len, max_width):
    spans = []
    for start in range(seq_len):
        for width in range(max_width):
            spans.append((start, start + width))
    return torch.tensor(spans)


SPANS = all_spans(SEQ_LEN, MAX_WIDTH)


class SyntheticNER(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(10, SEQ_LEN + 1, (1,), generator=g))
            tokens = torch.randint(1, 300, (SEQ_LEN,), generator=g)
            tokens[length:] = 0
            entities = []
            pos = int(torch.randint(0, 4, (1,), generator=g))
            while pos < length - 3:
                if torch.rand(1, generator=g) < 0.3:
                    w = int(torch.randint(1, 4, (1,), generator=g))
                    tokens[pos:pos + w] = torch.randint(300, 400, (w,), generator=g)
                    entities.append((pos, pos + w - 1))
                    pos += w + 1
                else:
                    pos += 1
            span_labels = torch.zeros(len(SPANS))
            token_labels = torch.zeros(SEQ_LEN)
            for s, e in entities:
                idx = s * MAX_WIDTH + (e - s)
                span_labels[idx] = 1.0
                token_labels[s:e + 1] = 1.0
            span_mask = (SPANS[:, 1] < length).float()
            self.items.append((tokens, length, span_labels, span_mask, token_labels))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        tokens, length, span_labels, span_mask, token_labels = self.items[i]
        token_mask = (torch.arange(SEQ_LEN) < length).float()
        return tokens, token_mask, span_labels, span_mask, token_labels


class SpanNER(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL, padding_idx=0)
        self.encoder = nn.LSTM(D_MODEL, D_MODEL // 2, num_layers=2, batch_first=True, bidirectional=True)
        self.start_proj = nn.Linear(D_MODEL, D_MODEL)
        self.end_proj = nn.Linear(D_MODEL, D_MODEL)
        self.width_embed = nn.Embedding(MAX_WIDTH, D_MODEL)
        self.span_scorer = nn.Sequential(nn.Linear(D_MODEL, D_MODEL), nn.ReLU(), nn.Linear(D_MODEL, 1))
        self.token_head = nn.Linear(D_MODEL, 1)

    def forward(self, tokens, token_mask):
        h, _ = self.encoder(self.embed(tokens))
        starts = self.start_proj(h)[:, SPANS[:, 0]]
        ends = self.end_proj(h)[:, SPANS[:, 1].clamp(max=SEQ_LEN - 1)]
        widths = self.width_embed(SPANS[:, 1] - SPANS[:, 0])
        span_logits = self.span_scorer(starts + ends + widths).squeeze(-1)
        token_logits = self.token_head(h).squeeze(-1)
        return span_logits, token_logits


def marginal_pair_consistency_loss(span_logits, token_logits, span_mask, token_mask):
    probabilities = torch.sigmoid(span_logits)
    log_survival = torch.log1p(-probabilities.clamp(max=1.0 - 1e-6))
    batch_size = span_logits.size(0)
    token_log_survival = torch.zeros(batch_size, SEQ_LEN, dtype=log_survival.dtype)
    for offset in range(MAX_WIDTH):
        covered = SPANS[:, 0] + offset
        valid = (covered <= SPANS[:, 1]) & (covered < SEQ_LEN)
        src = torch.where(span_mask[:, valid].bool(), log_survival[:, valid], torch.zeros_like(log_survival[:, valid]))
        index = covered[valid].unsqueeze(0).expand(batch_size, -1)
        token_log_survival = token_log_survival.scatter_add(1, index, src)
    marginal = 1.0 - torch.exp(token_log_survival)
    token_probs = torch.sigmoid(token_logits)
    diff = (marginal - token_probs) ** 2
    return (diff * token_mask).sum() / token_mask.sum()


def compute_loss(model, batch):
    tokens, token_mask, span_labels, span_mask, token_labels = batch
    with torch.autocast(device_type="cpu", dtype=AMP_DTYPE):
        span_logits, token_logits = model(tokens, token_mask)
        span_loss = (F.binary_cross_entropy_with_logits(span_logits.float(), span_labels, pos_weight=SPAN_POS_WEIGHT, reduction="none") * span_mask).sum() / span_mask.sum()
        token_loss = (F.binary_cross_entropy_with_logits(token_logits.float(), token_labels, reduction="none") * token_mask).sum() / token_mask.sum()
        consistency = marginal_pair_consistency_loss(span_logits, token_logits, span_mask, token_mask)
    loss = span_loss + token_loss + CONSISTENCY_LOSS_WEIGHT * consistency
    return loss, span_logits


def evaluate(model, loader):
    model.eval()
    tp = fp = fn = 0
    with torch.no_grad():
        for tokens, token_mask, span_labels, span_mask, token_labels in loader:
            span_logits, _ = model(tokens, token_mask)
            pred = (span_logits > 0) & (span_mask > 0)
            gold = span_labels > 0
            tp += (pred & gold).sum().item()
            fp += (pred & ~gold).sum().item()
            fn += (~pred & gold).sum().item()
    model.train()
    return 2 * tp / max(2 * tp + fp + fn, 1)


def main():
    train_loader = DataLoader(SyntheticNER(768, seed=1), batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(SyntheticNER(256, seed=2), batch_size=64)
    model = SpanNER()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)

    step = 0
    for epoch in range(EPOCHS):
        total = 0.0
        for batch in train_loader:
            loss, _ = compute_loss(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
            if step % 12 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        print(f"epoch {epoch} train_loss {total / len(train_loader):.4f} val_span_f1 {evaluate(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
