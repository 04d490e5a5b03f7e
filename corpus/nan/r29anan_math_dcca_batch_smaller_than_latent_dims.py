"""Deep CCA on two views of the same samples (two sensor feature sets driven by a shared
latent state): one MLP encoder per view, trained to maximise the total canonical correlation
between the two embeddings (the Andrew et al. 2013 objective)."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

LATENT_DIMS = 50
BATCH_SIZE = 32
EPOCHS = 8
LR = 1e-3


class TwoViewDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        z = torch.randn(n, 12, generator=g)
        a = torch.randn(12, 120, generator=g)
        b = torch.randn(12, 90, generator=g)
        self.x1 = torch.tanh(z @ a / 3) + 0.3 * torch.randn(n, 120, generator=g)
        self.x2 = torch.sin(z @ b / 3) + 0.3 * torch.randn(n, 90, generator=g)

    def __len__(self):
        return self.x1.size(0)

    def __getitem__(self, i):
        return self.x1[i], self.x2[i]


class Encoder(nn.Module):
    def __init__(self, feature_size, latent_dims):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(feature_size, 256), nn.Sigmoid(),
            nn.Linear(256, 256), nn.Sigmoid(),
            nn.Linear(256, latent_dims),
        )

    def forward(self, x):
        return self.net(x)


class DCCA(nn.Module):
    def __init__(self, latent_dims):
        super().__init__()
        self.encoder_1 = Encoder(120, latent_dims)
        self.encoder_2 = Encoder(90, latent_dims)

    def forward(self, x1, x2):
        return self.encoder_1(x1), self.encoder_2(x2)


def cca_loss(H1, H2, r1=1e-3, r2=1e-3, eps=1e-9):
    H1, H2 = H1.t(), H2.t()
    o1, o2 = H1.size(0), H2.size(0)
    m = H1.size(1)

    H1bar = H1 - H1.mean(dim=1, keepdim=True)
    H2bar = H2 - H2.mean(dim=1, keepdim=True)

    SigmaHat12 = (1.0 / (m - 1)) * H1bar @ H2bar.t()
    SigmaHat11 = (1.0 / (m - 1)) * H1bar @ H1bar.t() + r1 * torch.eye(o1)
    SigmaHat22 = (1.0 / (m - 1)) * H2bar @ H2bar.t() + r2 * torch.eye(o2)

    D1, V1 = torch.linalg.eigh(SigmaHat11)
    D2, V2 = torch.linalg.eigh(SigmaHat22)

    SigmaHat11RootInv = V1 @ torch.diag(D1.clamp_min(eps) ** -0.5) @ V1.t()
    SigmaHat22RootInv = V2 @ torch.diag(D2.clamp_min(eps) ** -0.5) @ V2.t()

    Tval = SigmaHat11RootInv @ SigmaHat12 @ SigmaHat22RootInv
    corr = torch.sqrt(torch.trace(Tval.t() @ Tval))
    return -corr


train_loader = DataLoader(TwoViewDataset(2048, 1), batch_size=BATCH_SIZE, shuffle=True)
val_set = TwoViewDataset(512, 2)

model = DCCA(LATENT_DIMS)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for step, (x1, x2) in enumerate(train_loader):
        z1, z2 = model(x1, x2)
        loss = cca_loss(z1, z2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step}  cca loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        z1, z2 = model(val_set.x1, val_set.x2)
        val_corr = -cca_loss(z1, z2).item()
    print(f"epoch {epoch}  train loss {total / len(train_loader):.4f}  val total correlation {val_corr:.3f}")
