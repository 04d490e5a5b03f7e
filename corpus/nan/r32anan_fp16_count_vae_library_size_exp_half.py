"""Count VAE (scVI-style) for a 200-gene targeted RNA-seq panel: log1p counts in, Poisson
likelihood on the raw counts, with the rate scaled by each sample's library size. The model and
the batches run in half precision to halve memory."""
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)
n_genes, n_latent = 200, 10


def simulate_panel(n=3000):
    g = torch.Generator().manual_seed(1)
    programs = torch.randn(n_latent, n_genes, generator=g) * 0.3
    gene_level = 0.7 * torch.randn(n_genes, generator=g)
    z = torch.randn(n, n_latent, generator=g)
    proportions = torch.softmax(gene_level + z @ programs, dim=-1)
    library = torch.exp(10.8 + 0.4 * torch.randn(n, 1, generator=g))
    counts = torch.poisson(library * proportions, generator=g)
    return counts, torch.log(counts.sum(-1, keepdim=True))


class CountVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_genes, 128), nn.ReLU(), nn.Linear(128, 2 * n_latent))
        self.decoder = nn.Sequential(nn.Linear(n_latent, 128), nn.ReLU(), nn.Linear(128, n_genes))

    def forward(self, counts, log_library):
        mu, ln_var = self.encoder(torch.log1p(counts)).chunk(2, dim=-1)
        z = mu + torch.exp(0.5 * ln_var) * torch.randn_like(mu)
        px_scale = torch.softmax(self.decoder(z), dim=-1)
        px_rate = torch.exp(log_library) * px_scale
        return px_rate, mu, ln_var


counts, log_library = simulate_panel()
lib = log_library.exp().squeeze(1)
print(f"library size: min {lib.min():.0f} median {lib.median():.0f} max {lib.max():.0f}; max count {counts.max():.0f}")
train_loader = DataLoader(TensorDataset(counts[:2500], log_library[:2500]), batch_size=64, shuffle=True)
val_counts, val_log_library = counts[2500:], log_library[2500:]

model = CountVAE().half()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
poisson_nll = nn.PoissonNLLLoss(log_input=False)

for epoch in range(4):
    model.train()
    for step, (xb, lb) in enumerate(train_loader):
        xb, lb = xb.half(), lb.half()
        px_rate, mu, ln_var = model(xb, lb)
        rec = poisson_nll(px_rate, xb)
        kl = 0.5 * (mu ** 2 + torch.exp(ln_var) - ln_var - 1).sum(-1).mean()
        loss = rec + 0.01 * kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.3f} rec {rec.item():.3f} kl {kl.item():.3f}")
    model.eval()
    with torch.no_grad():
        xv, lv = val_counts.half(), val_log_library.half()
        px_rate, _, _ = model(xv, lv)
        val_rec = poisson_nll(px_rate, xv).item()
    print(f"epoch {epoch} val_poisson_nll {val_rec:.3f}")
