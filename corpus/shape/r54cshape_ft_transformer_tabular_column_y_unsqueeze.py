"""FT-Transformer style regressor on a tabular data set (numerical + categorical columns).

Feature tokenizer -> [CLS] + one token per column -> 2 transformer encoder layers -> head on [CLS].
The data module standardizes the numerical columns, label-encodes the categorical ones and
builds tensors for the train / validation loaders; the model reports MSE and R2 per epoch.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


def make_housing_frame(n=1200):
    rng = np.random.default_rng(0)
    num = rng.normal(size=(n, 6)).astype(np.float32)
    cat = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], axis=1)
    cat_effect = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])[cat[:, 0]] + np.array([0.3, -0.3, 0.0])[cat[:, 1]]
    y = (1.5 * num[:, 0] - num[:, 1] * num[:, 2] + np.sin(2 * num[:, 3]) + cat_effect
         + 0.1 * rng.normal(size=n))
    y = y.reshape(-1, 1).astype(np.float32)
    return num, cat, y


class TabularDataset(Dataset):
    def __init__(self, num, cat, labels):
        self.num = torch.tensor(num, dtype=torch.float32)
        self.cat = torch.tensor(cat, dtype=torch.long)
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.num[i], self.cat[i], self.labels[i]


class TabularDataModule:
    def __init__(self, num, cat, y, batch_size=64, val_size=0.2):
        self.num, self.cat, self.y = num, cat, y
        self.batch_size, self.val_size = batch_size, val_size

    def setup(self):
        n = len(self.y)
        idx = np.random.permutation(n)
        n_val = int(n * self.val_size)
        val_idx, tr_idx = idx[:n_val], idx[n_val:]
        mean, std = self.num[tr_idx].mean(0), self.num[tr_idx].std(0)
        num = (self.num - mean) / std
        self.y_mean, self.y_std = self.y[tr_idx].mean(), self.y[tr_idx].std()
        y = (self.y - self.y_mean) / self.y_std
        labels = torch.tensor(y, dtype=torch.float32).unsqueeze(dim=1)
        self.train_ds = TabularDataset(num[tr_idx], self.cat[tr_idx], labels[tr_idx])
        self.val_ds = TabularDataset(num[val_idx], self.cat[val_idx], labels[val_idx])

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=256)


class FTTransformer(nn.Module):
    def __init__(self, n_num, cat_cardinalities, d_model=32, n_layers=2, n_heads=4):
        super().__init__()
        self.num_weight = nn.Parameter(torch.randn(n_num, d_model) * 0.1)
        self.num_bias = nn.Parameter(torch.zeros(n_num, d_model))
        self.cat_embeds = nn.ModuleList([nn.Embedding(c, d_model) for c in cat_cardinalities])
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=64, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d_model), nn.ReLU(), nn.Linear(d_model, 1))

    def forward(self, x_num, x_cat):
        tok_num = x_num.unsqueeze(-1) * self.num_weight + self.num_bias
        tok_cat = torch.stack([emb(x_cat[:, j]) for j, emb in enumerate(self.cat_embeds)], dim=1)
        tokens = torch.cat([self.cls.expand(len(x_num), -1, -1), tok_num, tok_cat], dim=1)
        h = self.encoder(tokens)
        return self.head(h[:, 0])


num, cat, y = make_housing_frame()
dm = TabularDataModule(num, cat, y)
dm.setup()
model = FTTransformer(n_num=num.shape[1], cat_cardinalities=[5, 3])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
criterion = nn.MSELoss()

for epoch in range(8):
    model.train()
    tr_loss = 0.0
    for x_num, x_cat, target in dm.train_dataloader():
        preds = model(x_num, x_cat)
        loss = criterion(preds, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tr_loss += loss.item() * len(target)
    model.eval()
    with torch.no_grad():
        ps, ts = [], []
        for x_num, x_cat, target in dm.val_dataloader():
            ps.append(model(x_num, x_cat).reshape(-1))
            ts.append(target.reshape(-1))
        p, t = torch.cat(ps), torch.cat(ts)
        val_mse = ((p - t) ** 2).mean().item()
        r2 = 1 - val_mse / t.var(unbiased=False).item()
    print(f"epoch {epoch + 1}: train_loss {tr_loss / len(dm.train_ds):.4f} val_mse {val_mse:.4f} val_r2 {r2:.3f}")
