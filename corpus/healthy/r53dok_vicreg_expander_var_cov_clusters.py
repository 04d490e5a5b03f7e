"""VICReg self-supervised pretraining on synthetic 'sensor' vectors, following the
facebookresearch/vicreg main_vicreg.py loss (invariance + variance hinge + off-diagonal covariance),
with a kNN probe on the backbone features after each epoch."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_CLASSES = 8
DIM = 32


def make_data(n, centers, proj):
    y = torch.randint(0, N_CLASSES, (n,))
    z = centers[y] + 0.6 * torch.randn(n, 6)
    x = torch.tanh(z @ proj) + 0.3 * torch.randn(n, DIM)
    return x, y


centers = 0.8 * torch.randn(N_CLASSES, 6)
proj = torch.randn(6, DIM) / 6 ** 0.5
x_train, y_train = make_data(1536, centers, proj)
x_test, y_test = make_data(512, centers, proj)


class TwoViews(Dataset):
    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def augment(self, v):
        mask = (torch.rand_like(v) > 0.2).float()
        scale = 1.0 + 0.2 * torch.randn(1)
        return (v * mask * scale) + 0.1 * torch.randn_like(v)

    def __getitem__(self, i):
        v = self.x[i]
        return self.augment(v), self.augment(v)


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class VICReg(nn.Module):
    def __init__(self, sim_coeff=25.0, std_coeff=25.0, cov_coeff=1.0):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(DIM, 128), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Linear(128, 64),
        )
        self.num_features = 128
        self.projector = nn.Sequential(
            nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Linear(128, self.num_features, bias=False),
        )
        self.sim_coeff = sim_coeff
        self.std_coeff = std_coeff
        self.cov_coeff = cov_coeff

    def forward(self, x, y):
        x = self.projector(self.backbone(x))
        y = self.projector(self.backbone(y))
        repr_loss = F.mse_loss(x, y)

        batch_size = x.shape[0]
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)

        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2

        cov_x = (x.T @ x) / (batch_size - 1)
        cov_y = (y.T @ y) / (batch_size - 1)
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(self.num_features) + \
            off_diagonal(cov_y).pow_(2).sum().div(self.num_features)

        loss = self.sim_coeff * repr_loss + self.std_coeff * std_loss + self.cov_coeff * cov_loss
        return loss, repr_loss, std_loss, cov_loss


@torch.no_grad()
def knn_accuracy(model, k=10):
    model.eval()
    ftr = F.normalize(model.backbone(x_train), dim=1)
    fte = F.normalize(model.backbone(x_test), dim=1)
    sim = fte @ ftr.T
    idx = sim.topk(k, dim=1).indices
    votes = F.one_hot(y_train[idx], N_CLASSES).sum(1)
    pred = votes.argmax(1)
    model.train()
    return (pred == y_test).float().mean().item()


model = VICReg()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-6)
loader = DataLoader(TwoViews(x_train), batch_size=128, shuffle=True, drop_last=True)

print(f"epoch 0 knn acc {knn_accuracy(model):.3f}")
step = 0
for epoch in range(1, 11):
    tot = 0.0
    for v1, v2 in loader:
        loss, inv, var, cov = model(v1, v2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tot += loss.item()
        step += 1
    print(f"epoch {epoch} step {step} loss {tot / len(loader):.4f} inv {inv.item():.4f} "
          f"std {var.item():.4f} cov {cov.item():.4f} knn acc {knn_accuracy(model):.3f}")
