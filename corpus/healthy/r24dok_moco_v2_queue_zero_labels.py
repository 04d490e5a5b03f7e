"""MoCo v2 (momentum contrast) pre-training of a small CNN on synthetic 10-class patterns,
following facebookresearch/moco: query/key encoders, a queue of negative keys, InfoNCE with
temperature, momentum update of the key encoder. Monitored with a kNN probe on held-out data."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def make_prototypes(n_classes=10, size=16):
    g = torch.Generator().manual_seed(1)
    protos = torch.randn(n_classes, 1, size // 4, size // 4, generator=g)
    return F.interpolate(protos, size=size, mode="bilinear", align_corners=False)


PROTOS = make_prototypes()


class PatternSet(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.images = PROTOS[self.labels] * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g))
        self.images = self.images + 0.3 * torch.randn(self.images.shape, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def augment(x):
    shift = torch.randint(-2, 3, (2,))
    x = torch.roll(x, shifts=(int(shift[0]), int(shift[1])), dims=(-2, -1))
    if torch.rand(1).item() < 0.5:
        x = torch.flip(x, dims=(-1,))
    blob = F.interpolate(torch.randn(1, 1, 3, 3), size=x.shape[-1], mode="bilinear", align_corners=False)[0]
    x = x * (0.7 + 0.6 * torch.rand(1)) + 0.7 * blob + 0.4 * torch.randn_like(x)
    return x


class TwoCropsTransform:
    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        return [self.base_transform(x), self.base_transform(x)]


class TwoCropSet(Dataset):
    def __init__(self, base):
        self.base = base
        self.transform = TwoCropsTransform(augment)

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return self.transform(x), y


class ConvNet(nn.Module):
    def __init__(self, num_classes=128):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=32, K=1024, m=0.99, T=0.2, mlp=True):
        super().__init__()
        self.K = K
        self.m = m
        self.T = T

        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)

        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)

        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False

        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        q = self.encoder_q(im_q)
        q = nn.functional.normalize(q, dim=1)

        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = self.encoder_k(im_k)
            k = nn.functional.normalize(k, dim=1)

        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)

        self._dequeue_and_enqueue(k)
        return logits, labels


@torch.no_grad()
def knn_accuracy(encoder, train_set, val_set, k=10):
    encoder.eval()
    bank = F.normalize(encoder.features(train_set.images), dim=1)
    feats = F.normalize(encoder.features(val_views), dim=1)
    sim = feats @ bank.T
    idx = sim.topk(k, dim=1).indices
    votes = F.one_hot(train_set.labels[idx], 10).sum(1)
    encoder.train()
    return (votes.argmax(1) == val_set.labels).float().mean().item()


def accuracy(output, target, topk=(1, 5)):
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
    return [correct[:k].reshape(-1).float().sum().item() * 100.0 / target.size(0) for k in topk]


train_base = PatternSet(1536, seed=2)
val_base = PatternSet(512, seed=3)
val_views = torch.stack([augment(x) for x in val_base.images])
train_loader = DataLoader(TwoCropSet(train_base), batch_size=64, shuffle=True, drop_last=True)

model = MoCo(ConvNet, dim=32, K=512, m=0.99, T=0.2, mlp=True)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.06, momentum=0.9, weight_decay=1e-4)
epochs = 4
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)

print(f"kNN acc before training: {knn_accuracy(model.encoder_q, train_base, val_base):.3f}")
for epoch in range(epochs):
    model.train()
    total, top1_sum, n = 0.0, 0.0, 0
    for i, (images, _) in enumerate(train_loader):
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        total += loss.item()
        top1_sum += acc1
        n += 1

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    knn = knn_accuracy(model.encoder_q, train_base, val_base)
    print(f"epoch {epoch}: loss {total / n:.3f}  contrastive acc@1 {top1_sum / n:.1f}%  kNN acc {knn:.3f}")
