"""Document regression: predict a readability score (0..16) from a token sequence.

A small transformer encoder (stand-in for distilBERT) mean-pools its token states and a regression
head ([768, 1] in the original config, smaller here) produces one value per document. Labels
come from the data processor as a float tensor of shape (1,) per document, standardised with the
training set's mean and scale (as the regression processor does); RMSE is reported in score units.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)

VOCAB = 500
MAX_LEN = 48


class RegressionDocs(Dataset):
    """Each document's score is driven by how many 'hard' tokens (ids >= 400) it contains."""

    def __init__(self, n):
        self.input_ids = torch.randint(1, 400, (n, MAX_LEN))
        n_hard = torch.randint(0, 17, (n,))
        for i in range(n):
            pos = torch.randperm(MAX_LEN - 1)[: n_hard[i]] + 1
            self.input_ids[i, pos] = torch.randint(400, VOCAB, (len(pos),))
        self.input_ids[:, 0] = 0  # [CLS]
        self.labels = n_hard.float() + 0.3 * torch.randn(n)
        self.scaler_mean, self.scaler_scale = 8.0, 4.9

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        label = (self.labels[i] - self.scaler_mean) / self.scaler_scale
        return {"input_ids": self.input_ids[i], "label_ids": label.view(1)}


class LanguageModel(nn.Module):
    def __init__(self, dim=64, layers=2, heads=4):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim)
        self.position = nn.Parameter(torch.randn(1, MAX_LEN, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)

    def forward(self, input_ids):
        h = self.embeddings(input_ids) + self.position
        return self.encoder(h).mean(dim=1)


class RegressionHead(nn.Module):
    def __init__(self, layer_dims):
        super().__init__()
        self.feed_forward = nn.Linear(layer_dims[0], layer_dims[1])
        self.loss_fct = nn.MSELoss(reduction="none")

    def forward(self, x):
        return self.feed_forward(x)

    def logits_to_loss(self, logits, label_ids):
        return self.loss_fct(logits, label_ids)


class AdaptiveModel(nn.Module):
    def __init__(self, language_model, prediction_head):
        super().__init__()
        self.language_model = language_model
        self.prediction_head = prediction_head

    def forward(self, input_ids):
        pooled = self.language_model(input_ids)
        logits = self.prediction_head(pooled)
        return logits.squeeze()

    def logits_to_loss(self, logits, label_ids):
        return self.prediction_head.logits_to_loss(logits, label_ids).mean()


def evaluate(model, loader):
    model.eval()
    se, n = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            preds = model(batch["input_ids"]).view(-1)
            se += ((preds - batch["label_ids"].view(-1)) ** 2).sum().item()
            n += preds.numel()
    model.train()
    return math.sqrt(se / n) * loader.dataset.scaler_scale


if __name__ == "__main__":
    train_loader = DataLoader(RegressionDocs(1024), batch_size=32, shuffle=True)
    dev_loader = DataLoader(RegressionDocs(320), batch_size=32)
    model = AdaptiveModel(LanguageModel(), RegressionHead([64, 1]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)

    step = 0
    for epoch in range(3):
        for batch in train_loader:
            logits = model(batch["input_ids"])
            loss = model.logits_to_loss(logits, batch["label_ids"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"Train epoch {epoch + 1}/3 (Cur. train loss: {loss.item():.4f})")
        print(f"epoch {epoch + 1}: dev RMSE {evaluate(model, dev_loader):.3f}")
