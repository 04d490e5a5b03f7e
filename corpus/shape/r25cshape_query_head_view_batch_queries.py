"""Query-based relation/slot predictor (DETR-style head) on synthetic 4-region scenes.

A small CNN backbone gives a feature map, a TransformerDecoder with learned queries
attends over it (sequence-first layout, as in DETR), and each query predicts the class of
the object in its region.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

NUM_QUERIES = 4
NUM_CLASSES = 5


class SceneDataset(Dataset):
    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n, NUM_QUERIES), generator=g)
        imgs = 0.1 * torch.randn(n, 3, 16, 16, generator=g)
        palette = torch.randn(NUM_CLASSES, 3, generator=torch.Generator().manual_seed(123))
        for i in range(n):
            for q in range(NUM_QUERIES):
                r, c = divmod(q, 2)
                imgs[i, :, r * 8 + 2:r * 8 + 6, c * 8 + 2:c * 8 + 6] += palette[self.labels[i, q]][:, None, None]
        self.imgs = imgs

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.imgs[i], self.labels[i]


class SlotHead(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, d_model, 3, stride=2, padding=1), nn.ReLU())
        self.pos_embed = nn.Parameter(torch.randn(64, 1, d_model) * 0.1)
        self.query_embed = nn.Embedding(NUM_QUERIES, d_model)
        layer = nn.TransformerDecoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.0)
        self.decoder = nn.TransformerDecoder(layer, num_layers=2)
        self.class_embed = nn.Linear(d_model, NUM_CLASSES)

    def forward(self, img):
        bs = img.shape[0]
        src = self.backbone(img)
        memory = src.flatten(2).permute(2, 0, 1) + self.pos_embed
        tgt = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
        hs = self.decoder(tgt, memory)
        hs = hs.view(bs, NUM_QUERIES, -1)
        return self.class_embed(hs)


def main():
    train_loader = DataLoader(SceneDataset(960, seed=0), batch_size=32, shuffle=True)
    val_loader = DataLoader(SceneDataset(256, seed=1), batch_size=64)
    model = SlotHead()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(6):
        model.train()
        total = 0.0
        for img, labels in train_loader:
            logits = model(img)
            loss = F.cross_entropy(logits.reshape(-1, NUM_CLASSES), labels.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        correct = n = 0
        with torch.no_grad():
            for img, labels in val_loader:
                correct += (model(img).argmax(-1) == labels).sum().item()
                n += labels.numel()
        print(f"epoch {epoch}  train loss {total / len(train_loader):.4f}  val slot acc {correct / n:.3f}")


if __name__ == "__main__":
    main()
