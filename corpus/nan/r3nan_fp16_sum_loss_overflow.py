"""Denoising autoencoder for 32x32 single-channel height-map patches.

To fit bigger batches the model and the data are kept in float16 and trained with plain
SGD + momentum.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

BATCH_SIZE = 64


class HeightPatches(Dataset):
    """Smooth random surfaces (sums of a few 2-D sinusoids), values roughly in [-3, 3]."""

    def __init__(self, n=768, size=32):
        g = torch.Generator().manual_seed(0)
        ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
        freq = torch.rand(n, 3, 2, generator=g) * 6
        phase = torch.rand(n, 3, generator=g) * 6.28
        amp = torch.rand(n, 3, generator=g)
        surf = (amp[:, :, None, None] * torch.sin(
            6.28 * (freq[:, :, 0, None, None] * xs + freq[:, :, 1, None, None] * ys) + phase[:, :, None, None]
        )).sum(1)
        self.clean = surf.unsqueeze(1)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        clean = self.clean[i]
        noisy = clean + 0.3 * torch.randn_like(clean)
        return noisy, clean


class DenoiseAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 1, 3, padding=1),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


loader = DataLoader(HeightPatches(), batch_size=BATCH_SIZE, shuffle=True)
model = DenoiseAE().half()
criterion = nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)

step = 0
for epoch in range(2):
    for noisy, clean in loader:
        noisy, clean = noisy.half(), clean.half()
        recon = model(noisy)
        loss = criterion(recon, clean)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 5 == 0:
            print(f"epoch {epoch} step {step:3d}  sse {loss.item():.1f}  per-pixel {loss.item() / clean.numel():.4f}")
    print(f"epoch {epoch} done  sse {loss.item():.1f}")
