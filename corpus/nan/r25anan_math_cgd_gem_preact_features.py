"""Combination of Global Descriptors (CGD) for image retrieval, small version.

A pre-activation ResNet backbone, two global descriptors (SPoC mean pooling and
GeM with p=3) each followed by a linear projection + L2 norm, an auxiliary
classification head on the first descriptor. Trained with label-smoothed
cross-entropy + batch-hard triplet loss on 10 synthetic product categories.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

NUM_CLASSES = 10
IMG = 20


class ProductImages(Dataset):
    def __init__(self, n_per_class, seed):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(NUM_CLASSES, 3, IMG, IMG, generator=torch.Generator().manual_seed(123))
        protos = F.avg_pool2d(protos, 5, stride=1, padding=2)
        self.x, self.y = [], []
        for c in range(NUM_CLASSES):
            for _ in range(n_per_class):
                img = protos[c] * 1.2 + 1.0 * torch.randn(3, IMG, IMG, generator=g)
                self.x.append(img)
                self.y.append(c)
        self.x = torch.stack(self.x)
        self.y = torch.tensor(self.y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class PreActBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + shortcut


class GlobalDescriptor(nn.Module):
    def __init__(self, p=1):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 1:
            return x.mean(dim=[-1, -2])
        elif self.p == float('inf'):
            return torch.flatten(F.adaptive_max_pool2d(x, output_size=(1, 1)), start_dim=1)
        else:
            return x.pow(self.p).mean(dim=[-1, -2]) ** (1.0 / self.p)


class L2Norm(nn.Module):
    def forward(self, x):
        return F.normalize(x, p=2, dim=-1)


class Model(nn.Module):
    def __init__(self, gd_config='SG', feature_dim=128, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, 1, 1, bias=False),
            PreActBlock(32, 32, 1),
            PreActBlock(32, 64, 2),
            PreActBlock(64, 128, 2),
        )
        n = len(gd_config)
        k = feature_dim // n
        self.global_descriptors, self.main_modules = [], []
        for i in range(n):
            p = 1 if gd_config[i] == 'S' else (float('inf') if gd_config[i] == 'M' else 3)
            self.global_descriptors.append(GlobalDescriptor(p=p))
            self.main_modules.append(nn.Sequential(nn.Linear(128, k, bias=False), L2Norm()))
        self.global_descriptors = nn.ModuleList(self.global_descriptors)
        self.main_modules = nn.ModuleList(self.main_modules)
        self.auxiliary_module = nn.Sequential(nn.BatchNorm1d(128), nn.Linear(128, num_classes))

    def forward(self, x):
        shared = self.features(x)
        global_descriptors = []
        for i in range(len(self.global_descriptors)):
            global_descriptor = self.global_descriptors[i](shared)
            if i == 0:
                classes = self.auxiliary_module(global_descriptor)
            global_descriptors.append(self.main_modules[i](global_descriptor))
        return F.normalize(torch.cat(global_descriptors, dim=-1), dim=-1), classes


class BatchHardTripletLoss(nn.Module):
    def __init__(self, margin=0.1):
        super().__init__()
        self.margin = margin

    def forward(self, feats, labels):
        sim = feats @ feats.t()
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos = sim.masked_fill(~same | eye, 2.0).min(dim=1).values
        neg = sim.masked_fill(same, -2.0).max(dim=1).values
        return F.relu(neg - pos + self.margin).mean()


train_loader = DataLoader(ProductImages(48, seed=1), batch_size=40, shuffle=True)
test_set = ProductImages(12, seed=2)

model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
class_criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
feature_criterion = BatchHardTripletLoss(margin=0.1)

for epoch in range(1, 5):
    model.train()
    total_loss, n = 0.0, 0
    for step, (inputs, labels) in enumerate(train_loader):
        features, classes = model(inputs)
        class_loss = class_criterion(classes, labels)
        feature_loss = feature_criterion(features, labels)
        loss = class_loss + feature_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(labels)
        n += len(labels)
        if step % 4 == 0:
            print(f"epoch {epoch} step {step} class_loss {class_loss.item():.4f} "
                  f"feature_loss {feature_loss.item():.4f} loss {loss.item():.4f}")

    model.eval()
    with torch.no_grad():
        feats, _ = model(test_set.x)
        sim = feats @ feats.t()
        sim.fill_diagonal_(-3.0)
        nearest = sim.argmax(dim=1)
        recall1 = (test_set.y[nearest] == test_set.y).float().mean().item()
    print(f"epoch {epoch} train_loss {total_loss / n:.4f} recall@1 {recall1:.4f}")
