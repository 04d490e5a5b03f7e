"""Transfer learning with cached "bottleneck" features.

A frozen convolutional backbone turns every training image into a feature vector once; the
features are cached in memory and a small classifier head is then trained on the cache for a
few epochs (much faster than pushing images through the backbone every epoch).

Data: a synthetic 10-class image set (3x16x16 textures, each class its own pattern, randomly
shifted, plus noise). The backbone stands in for an ImageNet network: nothing is downloaded, so
its weights are a fixed random initialisation that is never trained.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 10


class TextureDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(NUM_CLASSES, 3, 16, 16, generator=torch.Generator().manual_seed(99))
        protos = F.avg_pool2d(protos, 3, stride=1, padding=1) * 2.0
        self.targets = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        shifts = torch.randint(-2, 3, (n, 2), generator=g)
        imgs = torch.stack([torch.roll(protos[c], (int(s[0]), int(s[1])), dims=(1, 2))
                            for c, s in zip(self.targets, shifts)])
        self.images = imgs + 1.6 * torch.randn(imgs.shape, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.images[idx], self.targets[idx]


def make_backbone():
    backbone = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
    )
    for p in backbone.parameters():
        p.requires_grad = False
    return backbone.eval()


@torch.no_grad()
def extract_features(backbone, loader):
    feats = []
    for images, _ in loader:
        feats.append(backbone(images))
    return torch.cat(feats)


def main():
    train_set = TextureDataset(4800, seed=1)
    val_set = TextureDataset(1000, seed=2)
    backbone = make_backbone()

    print("extracting bottleneck features...")
    train_feature_loader = DataLoader(train_set, batch_size=200, shuffle=True)
    val_feature_loader = DataLoader(val_set, batch_size=200, shuffle=False)
    train_features = extract_features(backbone, train_feature_loader)
    train_labels = train_set.targets
    val_features = extract_features(backbone, val_feature_loader)
    val_labels = val_set.targets
    print(f"train features {tuple(train_features.shape)}, val features {tuple(val_features.shape)}")

    mean, std = train_features.mean(0), train_features.std(0) + 1e-6
    train_features = (train_features - mean) / std
    val_features = (val_features - mean) / std

    head = nn.Sequential(nn.Linear(train_features.shape[1], 64), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(64, NUM_CLASSES))
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(train_features, train_labels), batch_size=64, shuffle=True)

    step = 0
    for epoch in range(3):
        head.train()
        running, correct, seen = 0.0, 0, 0
        for feats, labels in loader:
            optimizer.zero_grad()
            logits = head(feats)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            running += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
            step += 1
            if step % 25 == 0:
                print(f"epoch {epoch} step {step:3d} loss {loss.item():.4f}")
        head.eval()
        with torch.no_grad():
            val_logits = head(val_features)
            val_loss = criterion(val_logits, val_labels).item()
            val_acc = (val_logits.argmax(1) == val_labels).float().mean().item()
        print(f"epoch {epoch}: train loss {running / seen:.4f} train acc {correct / seen:.3f} | "
              f"val loss {val_loss:.4f} val acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
