"""Defect / no-defect classifier for small grayscale patches with a binary focal loss.

The positives are rare (about 1 in 4), so the loss is the binary focal loss with
logits (kornia-style: input (N, 1, *), target (N, 1, *)). Reports loss, accuracy and
recall on a held-out split after every epoch.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


def binary_focal_loss_with_logits(input, target, alpha=0.25, gamma=2.0, reduction='none', eps=1e-8):
    if not len(input.shape) >= 2:
        raise ValueError(f"Invalid input shape, we expect BxCx*. Got: {input.shape}")
    if input.size(0) != target.size(0):
        raise ValueError(f'Expected input batch_size ({input.size(0)}) to match target batch_size ({target.size(0)}).')

    probs = torch.sigmoid(input)
    target = target.unsqueeze(dim=1)
    loss_tmp = -alpha * torch.pow((1.0 - probs + eps), gamma) * target * torch.log(probs + eps) - (
        1 - alpha
    ) * torch.pow(probs + eps, gamma) * (1.0 - target) * torch.log(1.0 - probs + eps)
    loss_tmp = loss_tmp.squeeze(dim=1)

    if reduction == 'none':
        loss = loss_tmp
    elif reduction == 'mean':
        loss = torch.mean(loss_tmp)
    elif reduction == 'sum':
        loss = torch.sum(loss_tmp)
    else:
        raise NotImplementedError(f"Invalid reduction mode: {reduction}")
    return loss


class BinaryFocalLossWithLogits(nn.Module):
    def __init__(self, alpha, gamma=2.0, reduction='none'):
        super().__init__()
        self.alpha = alpha
        self.gamma = gamma
        self.reduction = reduction

    def forward(self, input, target):
        return binary_focal_loss_with_logits(input, target, self.alpha, self.gamma, self.reduction)


class DefectPatches(Dataset):
    """16x16 noisy texture patches; a defect is a short bright scratch."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
        self.y = (torch.rand(n, generator=g) < 0.25).float()
        for i in torch.nonzero(self.y).flatten().tolist():
            r = int(torch.randint(2, 14, (1,), generator=g))
            c = int(torch.randint(2, 10, (1,), generator=g))
            self.x[i, 0, r, c:c + 5] += 1.5

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i].unsqueeze(0)


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1),
        )
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


train_loader = DataLoader(DefectPatches(2048, 1), batch_size=64, shuffle=True)
val_loader = DataLoader(DefectPatches(512, 2), batch_size=128)

model = PatchNet()
criterion = BinaryFocalLossWithLogits(alpha=0.25, gamma=2.0, reduction='mean')
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(6):
    model.train()
    running = 0.0
    for x, y in train_loader:
        logits = model(x)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()

    model.eval()
    correct, tp, pos = 0, 0, 0
    with torch.no_grad():
        for x, y in val_loader:
            pred = (torch.sigmoid(model(x)) > 0.5).float()
            correct += (pred == y).sum().item()
            tp += ((pred == 1) & (y == 1)).sum().item()
            pos += (y == 1).sum().item()
    print(f"epoch {epoch + 1}: train loss {running / len(train_loader):.4f}  "
          f"val acc {correct / len(val_loader.dataset):.3f}  val recall {tp / max(pos, 1):.3f}")
