"""Protein property regression (stability score) from amino-acid sequences with a small CNN:
the sequence is split into three segments (N-terminal, middle, C-terminal), each segment gets
a prediction from a shared head, and the three are averaged at inference."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

AMINO = "ACDEFGHIKLMNPQRSTVWY"
SEQ_LEN = 72


def make_proteins(n):
    aa_weight = np.random.randn(len(AMINO))
    seqs = np.random.randint(0, len(AMINO), size=(n, SEQ_LEN))
    score = aa_weight[seqs].mean(axis=1) * 4.0
    score += 1.5 * aa_weight[seqs[:, :24]].mean(axis=1)
    score += 0.1 * np.random.randn(n)
    score = (score - score.mean()) / score.std()
    return seqs, score.astype(np.float32)


class ProteinDataset(Dataset):
    def __init__(self, seqs, scores):
        self.seqs = torch.tensor(seqs, dtype=torch.long)
        self.scores = torch.tensor(scores)

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, idx):
        return self.seqs[idx], self.scores[idx]


class ProteinCNN(nn.Module):
    def __init__(self, n_tokens=len(AMINO), emb=32, hidden=64, n_segments=3):
        super().__init__()
        self.embed = nn.Embedding(n_tokens, emb)
        self.encoder = nn.Sequential(
            nn.Conv1d(emb, hidden, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.Conv1d(hidden, hidden, kernel_size=5, padding=2),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool1d(n_segments)
        self.head = nn.Sequential(nn.Linear(hidden, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, seq):
        x = self.embed(seq).transpose(1, 2)
        x = self.encoder(x)
        x = self.pool(x).transpose(1, 2)
        return self.head(x)


def evaluate(model, loader):
    model.eval()
    preds, ys = [], []
    with torch.no_grad():
        for seq, y in loader:
            preds.append(model(seq).mean(dim=1).squeeze(-1))
            ys.append(y)
    model.train()
    p, t = torch.cat(preds), torch.cat(ys)
    mse = ((p - t) ** 2).mean().item()
    pearson = torch.corrcoef(torch.stack([p, t]))[0, 1].item()
    return mse, pearson


def main():
    seqs, scores = make_proteins(3200)
    train_ds = ProteinDataset(seqs[:2560], scores[:2560])
    val_ds = ProteinDataset(seqs[2560:], scores[2560:])
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=128)

    model = ProteinCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()

    step = 0
    for epoch in range(5):
        running = 0.0
        for seq, y in train_loader:
            pred = model(seq)
            loss = criterion(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
        val_mse, val_r = evaluate(model, val_loader)
        print(f"epoch {epoch + 1}  step {step}  train loss {running / len(train_loader):.4f}  "
              f"val mse {val_mse:.4f}  val pearson {val_r:.3f}")


if __name__ == "__main__":
    main()
