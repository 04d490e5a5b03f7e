"""Autoencoder on TCGA-style gene expression profiles (log2 TPM of 300 genes across 6 tumour
types): learn a 4-d embedding that reconstructs each profile, to be reused by the multi-task
heads later."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1)
np.random.seed(0)

N_SAMPLES, N_GENES, N_TYPES = 1200, 300, 6


def simulate_expression():
    type_profiles = np.random.gamma(2.0, 1.5, size=(N_TYPES, N_GENES))
    programs = np.random.randn(8, N_GENES)
    tumour_type = np.random.randint(0, N_TYPES, size=N_SAMPLES)
    activity = np.random.randn(N_SAMPLES, 8)
    log_tpm = type_profiles[tumour_type] + 0.6 * activity @ programs
    log_tpm += 0.3 * np.random.randn(N_SAMPLES, N_GENES)
    tpm = 2.0 ** np.clip(log_tpm, 0, None) - 1.0
    return np.log2(tpm + 1.0).astype(np.float32), tumour_type


class ExpressionDataset(Dataset):
    def __init__(self, X):
        self.X = torch.from_numpy(X)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, idx):
        return self.X[idx]


class AutoEncoder(nn.Module):
    def __init__(self, n_genes, hidden=128, code=4):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_genes, hidden), nn.ReLU(),
            nn.Linear(hidden, code), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.Linear(code, hidden), nn.ReLU(),
            nn.Linear(hidden, n_genes),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


X, tumour_type = simulate_expression()
train_ds, val_ds = ExpressionDataset(X[:1000]), ExpressionDataset(X[1000:])
train_loader = DataLoader(train_ds, batch_size=50, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=200)

model = AutoEncoder(N_GENES)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

mean_baseline = ((X[1000:] - X[:1000].mean(0)) ** 2).mean()
print(f"val MSE of predicting the mean profile: {mean_baseline:.4f}")

for epoch in range(1, 11):
    model.train()
    total = 0.0
    for x in train_loader:
        optimizer.zero_grad()
        recon = model(x)
        loss = criterion(recon, x)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(x)
    model.eval()
    with torch.no_grad():
        val = sum(criterion(model(x), x).item() * len(x) for x in val_loader) / len(val_ds)
    print(f"epoch {epoch:2d}  train MSE {total / len(train_ds):.4f}  val MSE {val:.4f}")
