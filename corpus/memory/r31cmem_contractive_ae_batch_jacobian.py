"""Contractive autoencoder on 28x28 digit-like images.

The reconstruction loss is regularised with the squared Frobenius norm of the Jacobian
of the encoder's hidden code with respect to the input (Rifai et al. 2011), computed
with torch.autograd.functional.jacobian so the penalty can be backpropagated.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.functional import jacobian
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

IN_DIM = 784
HIDDEN = 32
LAMBDA = 1e-3


def make_digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = (torch.rand(10, 28, 28, generator=torch.Generator().manual_seed(5)) > 0.7).float()
    y = torch.randint(0, 10, (n,), generator=g)
    x = (protos[y] + 0.05 * torch.randn(n, 28, 28, generator=g)).clamp(0, 1)
    return TensorDataset(x.view(n, IN_DIM), y)


class CAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(IN_DIM, 128), nn.ReLU(), nn.Linear(128, HIDDEN), nn.Sigmoid())
        self.decoder = nn.Sequential(nn.Linear(HIDDEN, 128), nn.ReLU(), nn.Linear(128, IN_DIM), nn.Sigmoid())

    def forward(self, x):
        h = self.encoder(x)
        return h, self.decoder(h)


train_loader = DataLoader(make_digits(1536, seed=1), batch_size=128, shuffle=True)
val_x = make_digits(512, seed=2).tensors[0]

model = CAE()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

for epoch in range(4):
    total_rec, total_pen = 0.0, 0.0
    for x, _ in train_loader:
        optimizer.zero_grad()
        h, recon = model(x)
        rec_loss = F.mse_loss(recon, x)
        J = jacobian(model.encoder, x, create_graph=True, vectorize=True)
        contractive = J.pow(2).sum() / x.size(0)
        loss = rec_loss + LAMBDA * contractive
        loss.backward()
        optimizer.step()
        total_rec += rec_loss.item()
        total_pen += contractive.item()
    with torch.no_grad():
        _, val_recon = model(val_x)
        val_mse = F.mse_loss(val_recon, val_x).item()
    n = len(train_loader)
    print(f"epoch {epoch}: recon MSE {total_rec / n:.4f}  jacobian penalty {total_pen / n:.3f}  val MSE {val_mse:.4f}")
