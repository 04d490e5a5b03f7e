"""Whole-slide image classification (tumour vs normal) with gated attention-based MIL (ABMIL).

Each slide is a bag of pre-extracted patch features. An ABMIL slide encoder pools the patches
into a slide embedding and a linear head classifies the slide. Follows the structure of a
slide-encoder wrapper + classification model tutorial.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

FEATURE_DIM = 64
PATCHES_PER_SLIDE = 128
N_TRAIN, N_VAL = 400, 200
BATCH_SIZE = 16
EPOCHS = 8


class GatedABMIL(nn.Module):
    def __init__(self, feature_dim, head_dim, n_heads=1, dropout=0.0):
        super().__init__()
        self.attention_a = nn.Sequential(nn.Linear(feature_dim, head_dim), nn.Tanh(), nn.Dropout(dropout))
        self.attention_b = nn.Sequential(nn.Linear(feature_dim, head_dim), nn.Sigmoid(), nn.Dropout(dropout))
        self.attention_c = nn.Linear(head_dim, n_heads)

    def forward(self, x):
        a = self.attention_a(x) * self.attention_b(x)
        attn = self.attention_c(a).transpose(1, 2)
        attn = F.softmax(attn, dim=-1)
        pooled = torch.bmm(attn, x).mean(dim=1)
        return pooled, attn


class BaseSlideEncoder(nn.Module):
    def __init__(self, freeze=True, **build_kwargs):
        super().__init__()
        self.model, self.embedding_dim = self._build(**build_kwargs)
        if freeze:
            for param in self.model.parameters():
                param.requires_grad = False
            self.model.eval()

    def _build(self, **build_kwargs):
        raise NotImplementedError


class ABMILSlideEncoder(BaseSlideEncoder):
    def _build(self, input_feature_dim, head_dim, dropout):
        model = nn.ModuleDict({
            "pre_attention_layers": nn.Sequential(
                nn.Linear(input_feature_dim, input_feature_dim), nn.GELU(), nn.Dropout(dropout)),
            "image_pooler": GatedABMIL(input_feature_dim, head_dim, dropout=dropout),
            "post_attention_layers": nn.Sequential(
                nn.Linear(input_feature_dim, input_feature_dim), nn.GELU(), nn.Dropout(dropout)),
        })
        return model, input_feature_dim

    def forward(self, features):
        h = self.model["pre_attention_layers"](features)
        h, _ = self.model["image_pooler"](h)
        return self.model["post_attention_layers"](h)


class BinaryClassificationModel(nn.Module):
    def __init__(self, input_feature_dim=FEATURE_DIM, head_dim=32, dropout=0.1):
        super().__init__()
        self.feature_encoder = ABMILSlideEncoder(
            input_feature_dim=input_feature_dim, head_dim=head_dim, dropout=dropout)
        self.classifier = nn.Linear(input_feature_dim, 1)

    def forward(self, features):
        return self.classifier(self.feature_encoder(features)).squeeze(1)


def make_slides(n, tumour_direction):
    labels = torch.randint(0, 2, (n,))
    feats = torch.randn(n, PATCHES_PER_SLIDE, FEATURE_DIM)
    for i in range(n):
        if labels[i] == 1:
            idx = torch.randperm(PATCHES_PER_SLIDE)[:3]
            feats[i, idx] += 5.0 * tumour_direction
    return feats, labels.float()


class SlideFeatureDataset(Dataset):
    def __init__(self, features, labels):
        self.features = features
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.features[idx], self.labels[idx]


tumour_direction = F.normalize(torch.randn(FEATURE_DIM), dim=0)
train_ds = SlideFeatureDataset(*make_slides(N_TRAIN, tumour_direction))
val_ds = SlideFeatureDataset(*make_slides(N_VAL, tumour_direction))
train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=BATCH_SIZE)

model = BinaryClassificationModel()
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for epoch in range(EPOCHS):
    model.train()
    total_loss, correct = 0.0, 0
    for features, labels in train_loader:
        optimizer.zero_grad()
        logits = model(features)
        loss = criterion(logits, labels)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(labels)
        correct += ((logits > 0).float() == labels).sum().item()
    model.eval()
    val_correct = 0
    with torch.no_grad():
        for features, labels in val_loader:
            val_correct += ((model(features) > 0).float() == labels).sum().item()
    print(f"Epoch {epoch + 1}/{EPOCHS}  train loss {total_loss / N_TRAIN:.4f}  "
          f"train acc {correct / N_TRAIN:.3f}  val acc {val_correct / N_VAL:.3f}")
