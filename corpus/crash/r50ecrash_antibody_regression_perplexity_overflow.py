"""Sentence-prediction regression (fairseq style) on antibody sequences: a small transformer
encoder reads the amino-acid sequence and predicts a biophysical property (melting temperature,
in degrees C). A trainer logs loss / nll_loss / ppl like fairseq-train does."""
import math
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

AMINO = "ACDEFGHIKLMNPQRSTVWY"
PAD = 0


class AntibodyTmDataset(Dataset):
    def __init__(self, n=960, min_len=24, max_len=40, seed=1):
        g = torch.Generator().manual_seed(seed)
        self.seqs, self.targets = [], []
        hydrophobic = torch.tensor([AMINO.index(a) + 1 for a in "AILMFVW"])
        for _ in range(n):
            length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
            seq = torch.randint(1, len(AMINO) + 1, (length,), generator=g)
            frac = torch.isin(seq, hydrophobic).float().mean()
            tm = 55.0 + 40.0 * frac + 2.0 * torch.randn(1, generator=g).item()
            self.seqs.append(seq)
            self.targets.append(float(tm))

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i], self.targets[i]


def collate(batch):
    seqs, targets = zip(*batch)
    max_len = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), max_len), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        tokens[i, :len(s)] = s
    return {"net_input": {"src_tokens": tokens}, "target": torch.tensor(targets),
            "ntokens": sum(len(s) for s in seqs), "nsentences": len(seqs)}


class SentencePredictionModel(nn.Module):
    def __init__(self, vocab=len(AMINO) + 1, dim=32, heads=4, layers=1, max_len=40):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(1, max_len, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.classification_head = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, 1))

    def forward(self, src_tokens):
        pad_mask = src_tokens.eq(PAD)
        x = self.embed(src_tokens) + self.pos[:, :src_tokens.size(1)]
        x = self.encoder(x, src_key_padding_mask=pad_mask)
        x = x.masked_fill(pad_mask.unsqueeze(-1), 0).sum(1) / (~pad_mask).sum(1, keepdim=True)
        return self.classification_head(x).squeeze(-1)


def regression_criterion(model, sample):
    logits = model(**sample["net_input"])
    loss = F.mse_loss(logits, sample["target"], reduction="sum")
    sample_size = sample["nsentences"]
    logging_output = {"loss": loss.item(), "ntokens": sample["ntokens"],
                      "nsentences": sample["nsentences"], "sample_size": sample_size}
    return loss, sample_size, logging_output


def safe_round(number, ndigits):
    return round(number, ndigits)


def get_perplexity(loss, round=2, base=2):
    if loss is None:
        return 0.0
    return safe_round(base ** loss, round)


def get_training_stats(logs):
    loss_sum = sum(log["loss"] for log in logs)
    sample_size = sum(log["sample_size"] for log in logs)
    stats = {"loss": loss_sum / sample_size, "nll_loss": loss_sum / sample_size / math.log(2),
             "bsz": sample_size / len(logs), "num_updates": len(logs)}
    stats["ppl"] = get_perplexity(stats["nll_loss"])
    return stats


def validate(model, loader):
    model.eval()
    logs = []
    with torch.no_grad():
        for sample in loader:
            _, _, log = regression_criterion(model, sample)
            logs.append(log)
    model.train()
    return get_training_stats(logs)


def main():
    train_set = AntibodyTmDataset(n=960, seed=1)
    valid_set = AntibodyTmDataset(n=160, seed=2)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate)
    valid_loader = DataLoader(valid_set, batch_size=80, collate_fn=collate)
    model = SentencePredictionModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-6)
    log_interval = 10
    num_updates = 0
    start = time.time()
    for epoch in range(1, 4):
        epoch_logs = []
        for i, sample in enumerate(train_loader):
            loss, sample_size, log = regression_criterion(model, sample)
            optimizer.zero_grad()
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            num_updates += 1
            epoch_logs.append(log)
            if num_updates % log_interval == 0:
                inner = epoch_logs[-log_interval:]
                inner_loss = sum(l["loss"] for l in inner) / sum(l["sample_size"] for l in inner)
                print(f"epoch {epoch:03d}: {i + 1:4d} / {len(train_loader)} loss={inner_loss:.1f} "
                      f"gnorm={gnorm:.2f} num_updates={num_updates}", flush=True)
        stats = get_training_stats(epoch_logs)
        print(f"epoch {epoch:03d} | loss {stats['loss']:.1f} | nll_loss {stats['nll_loss']:.0f} | "
              f"ppl {stats['ppl']} | bsz {stats['bsz']:.0f} | num_updates {num_updates} | "
              f"wall {time.time() - start:.0f}", flush=True)
        vstats = validate(model, valid_loader)
        print(f"epoch {epoch:03d} | valid on 'valid' subset | loss {vstats['loss']:.1f} | "
              f"nll_loss {vstats['nll_loss']:.0f} | ppl {vstats['ppl']} | num_updates {num_updates}", flush=True)


if __name__ == "__main__":
    main()
