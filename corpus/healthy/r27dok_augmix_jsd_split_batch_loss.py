"""AugMix training with the Jensen-Shannon consistency loss, following timm (timm/loss/jsd.py
JsdCrossEntropy, AugMixDataset with num_splits=3): each image is returned clean and as two AugMix
views, the collate function stacks the batch as [clean | aug1 | aug2] with the targets repeated, and
the loss takes the (label-smoothed) cross-entropy on the clean third only plus alpha=12 times the
JS divergence between the three predictions. Small CNN on synthetic 12x12 texture images, 4 classes."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

n_classes = 4
g = torch.Generator().manual_seed(0)
templates = F.avg_pool2d(torch.randn(n_classes, 1, 14, 14, generator=g), 3, stride=1)


def make_split(n, gen):
    y = torch.randint(0, n_classes, (n,), generator=gen)
    x = templates[y] + 0.8 * torch.randn(n, 1, 12, 12, generator=gen)
    return x, y


x_train, y_train = make_split(1200, g)
x_test, y_test = make_split(600, g)


def op_shift(img, rng):
    return torch.roll(img, shifts=(int(rng.integers(-1, 2)), int(rng.integers(-1, 2))), dims=(1, 2))


def op_contrast(img, rng):
    return (img - img.mean()) * float(rng.uniform(0.6, 1.4)) + img.mean()


def op_brightness(img, rng):
    return img + float(rng.uniform(-0.4, 0.4))


def op_noise(img, rng):
    return img + 0.3 * torch.from_numpy(rng.standard_normal(img.shape).astype(np.float32))


def op_blur(img, rng):
    return F.avg_pool2d(img.unsqueeze(0), 3, stride=1, padding=1, count_include_pad=False).squeeze(0)


AUG_OPS = [op_shift, op_contrast, op_brightness, op_noise, op_blur]


def augment_and_mix(img, rng, width=3, depth=-1, alpha=1.0):
    ws = rng.dirichlet([alpha] * width).astype(np.float32)
    m = np.float32(rng.beta(alpha, alpha))
    mix = torch.zeros_like(img)
    for i in range(width):
        img_aug = img.clone()
        d = depth if depth > 0 else rng.integers(1, 4)
        for _ in range(d):
            op = AUG_OPS[rng.integers(len(AUG_OPS))]
            img_aug = op(img_aug, rng)
        mix += ws[i] * img_aug
    return m * img + (1 - m) * mix


class AugMixDataset(Dataset):
    def __init__(self, x, y, num_splits=3, seed=0):
        self.x, self.y = x, y
        self.num_splits = num_splits
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = self.x[i]
        views = [img] + [augment_and_mix(img, self.rng) for _ in range(self.num_splits - 1)]
        return tuple(views), self.y[i]


def split_collate(batch):
    num_splits = len(batch[0][0])
    images = torch.cat([torch.stack([b[0][s] for b in batch]) for s in range(num_splits)])
    targets = torch.stack([b[1] for b in batch]).repeat(num_splits)
    return images, targets


class LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        self.smoothing = smoothing
        self.confidence = 1. - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        loss = self.confidence * nll_loss + self.smoothing * smooth_loss
        return loss.mean()


class JsdCrossEntropy(nn.Module):
    def __init__(self, num_splits=3, alpha=12, smoothing=0.1):
        super().__init__()
        self.num_splits = num_splits
        self.alpha = alpha
        self.cross_entropy_loss = LabelSmoothingCrossEntropy(smoothing)

    def __call__(self, output, target):
        split_size = output.shape[0] // self.num_splits
        assert split_size * self.num_splits == output.shape[0]
        logits_split = torch.split(output, split_size)

        loss = self.cross_entropy_loss(logits_split[0], target[:split_size])
        probs = [F.softmax(logits, dim=1) for logits in logits_split]

        logp_mixture = torch.clamp(torch.stack(probs).mean(axis=0), 1e-7, 1).log()
        loss += self.alpha * sum([F.kl_div(
            logp_mixture, p_split, reduction='batchmean') for p_split in probs]) / len(probs)
        return loss


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


train_loader = DataLoader(AugMixDataset(x_train, y_train), batch_size=40, shuffle=True,
                          collate_fn=split_collate)
model = SmallCNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
train_loss_fn = JsdCrossEntropy(num_splits=3, alpha=12, smoothing=0.1)


def evaluate():
    model.eval()
    with torch.no_grad():
        out = model(x_test)
        loss = F.cross_entropy(out, y_test).item()
        acc = (out.argmax(1) == y_test).float().mean().item()
    model.train()
    return loss, acc


loss, acc = evaluate()
print(f"epoch 0  test loss {loss:.4f}  test acc {acc:.3f}")
for epoch in range(1, 6):
    total, n = 0.0, 0
    for images, targets in train_loader:
        output = model(images)
        loss = train_loss_fn(output, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        n += 1
    tl, ta = evaluate()
    print(f"epoch {epoch}  train loss {total / n:.4f}  test loss {tl:.4f}  test acc {ta:.3f}")
