"""Image retrieval: fine-tune a CNN embedding with a classification loss, evaluate recall@1.

After every epoch the embeddings of the whole gallery are extracted with the network in eval
mode and concatenated into one matrix; each query image is matched to its nearest gallery
embedding (cosine) and recall@1 is the fraction whose neighbour has the query's class.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)

NUM_CLASSES = 16


class TexturedShapes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, 64), torch.linspace(-1, 1, 64), indexing="ij")
        freq = 2 + self.labels.float().view(-1, 1, 1) % 8
        orient = (self.labels >= 8).float().view(-1, 1, 1)
        base = torch.sin(freq * (orient * xx + (1 - orient) * yy) * 3.14)
        colour = torch.rand(n, 3, 1, 1, generator=g)
        self.images = colour * base.unsqueeze(1) + 0.4 * torch.randn(n, 3, 64, 64, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class EmbeddingNet(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.embed = nn.Linear(128, dim)
        self.classifier = nn.Linear(dim, NUM_CLASSES)

    def forward(self, x):
        return self.embed(self.features(x).flatten(1))


def extract(model, loader):
    model.eval()
    feats, labels = None, []
    for images, target in loader:
        f = F.normalize(model(images), dim=1)
        feats = f if feats is None else torch.cat((feats, f))
        labels.append(target)
    model.train()
    return feats, torch.cat(labels)


def recall_at_1(model, query_loader, gallery_loader):
    g_feats, g_labels = extract(model, gallery_loader)
    q_feats, q_labels = extract(model, query_loader)
    nn_idx = (q_feats @ g_feats.T).argmax(1)
    return (g_labels[nn_idx] == q_labels).float().mean().item()


if __name__ == "__main__":
    train_loader = DataLoader(TexturedShapes(480, seed=0), batch_size=32, shuffle=True)
    gallery_loader = DataLoader(TexturedShapes(1600, seed=1), batch_size=64)
    query_loader = DataLoader(TexturedShapes(320, seed=2), batch_size=64)

    model = EmbeddingNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    for epoch in range(2):
        running = 0.0
        for step, (images, labels) in enumerate(train_loader):
            logits = model.classifier(model(images))
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step}/{len(train_loader)} loss {loss.item():.4f}")
        r1 = recall_at_1(model, query_loader, gallery_loader)
        print(f"epoch {epoch}: train loss {running / len(train_loader):.4f}  recall@1 {r1:.3f}")
