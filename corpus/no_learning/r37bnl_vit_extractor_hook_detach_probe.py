"""Small ViT trained end to end on a spatial-relation task: each 12x12 image holds
a cross-shaped and a square-shaped glyph, and the label says whether the cross is
left/right of and above/below the square.  The patch tokens are taken from the
transformer with a vit_pytorch-style Extractor (forward hook), mean-pooled and
classified."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

IMG = 12
PATCH = 4
GRID = IMG // PATCH


def exists(val):
    return val is not None


class Extractor(nn.Module):
    def __init__(self, vit, device=None):
        super().__init__()
        self.vit = vit

        self.data = None
        self.latents = None
        self.hooks = []
        self.hook_registered = False
        self.ejected = False
        self.device = device

    def _hook(self, _, input, output):
        self.latents = output.clone().detach()

    def _register_hook(self):
        handle = self.vit.transformer.register_forward_hook(self._hook)
        self.hooks.append(handle)
        self.hook_registered = True

    def clear(self):
        del self.latents
        self.latents = None

    def forward(self, img):
        assert not self.ejected, 'extractor has been ejected, cannot be used anymore'
        self.clear()
        if not self.hook_registered:
            self._register_hook()

        pred = self.vit(img)

        target_device = self.device if exists(self.device) else img.device
        latents = self.latents.to(target_device)
        return pred, latents


class ViT(nn.Module):
    def __init__(self, num_classes, dim=32, depth=2, heads=4, mlp_dim=64):
        super().__init__()
        num_patches = GRID * GRID
        self.to_patch_embedding = nn.Linear(PATCH * PATCH, dim)
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, mlp_dim, dropout=0.0, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, depth)
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        b = img.shape[0]
        patches = img.view(b, GRID, PATCH, GRID, PATCH).permute(0, 1, 3, 2, 4).reshape(b, GRID * GRID, PATCH * PATCH)
        x = self.to_patch_embedding(patches) + self.pos_embedding
        x = self.transformer(x)
        return self.mlp_head(x.mean(dim=1))


class GlyphRelations(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        cross = torch.zeros(PATCH, PATCH)
        cross[1:3, :] = 1.0
        cross[:, 1:3] = 1.0
        square = torch.zeros(PATCH, PATCH)
        square[0, :] = square[-1, :] = square[:, 0] = square[:, -1] = 1.0
        self.images = torch.zeros(n, IMG, IMG)
        self.labels = torch.zeros(n, dtype=torch.long)
        for i in range(n):
            while True:
                a, b = torch.randint(0, GRID * GRID, (2,), generator=g).tolist()
                ra, ca, rb, cb = a // GRID, a % GRID, b // GRID, b % GRID
                if ra != rb and ca != cb:
                    break
            self.images[i, ra * PATCH:(ra + 1) * PATCH, ca * PATCH:(ca + 1) * PATCH] = cross
            self.images[i, rb * PATCH:(rb + 1) * PATCH, cb * PATCH:(cb + 1) * PATCH] = square
            self.labels[i] = 2 * int(ca < cb) + int(ra < rb)
        self.images += 0.1 * torch.randn(n, IMG, IMG, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class RelationNet(nn.Module):
    def __init__(self, num_classes=4, dim=32):
        super().__init__()
        vit = ViT(num_classes=num_classes, dim=dim)
        self.encoder = Extractor(vit)
        self.classifier = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def forward(self, img):
        _, embeddings = self.encoder(img)
        return self.classifier(embeddings.mean(dim=1))


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for img, y in loader:
            correct += (model(img).argmax(1) == y).sum().item()
            total += y.numel()
    model.train()
    return correct / total


def main():
    train_loader = DataLoader(GlyphRelations(2048, seed=1), batch_size=64, shuffle=True)
    val_loader = DataLoader(GlyphRelations(512, seed=2), batch_size=256)
    model = RelationNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(6):
        running, steps = 0.0, 0
        for img, y in train_loader:
            loss = F.cross_entropy(model(img), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            steps += 1
        print(f"epoch {epoch}  train loss {running / steps:.4f}  val acc {evaluate(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
