"""Inverse cooking, small version: predict the ingredient set of a dish from its image features,
plus the dish category as an auxiliary target.

Image features are generated: every ingredient adds its own direction to the image embedding,
so the ingredient set is recoverable from the features. The ingredient decoder is a GRU that
emits one ingredient distribution per step; the set loss max-pools the per-step probabilities.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_INGRS = 40
MAX_INGRS = 6
FEAT_DIM = 64
N_DISHES = 8


class RecipeFeatures(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        ingr_dirs = torch.randn(N_INGRS, FEAT_DIM, generator=torch.Generator().manual_seed(123))
        dish_protos = torch.rand(N_DISHES, N_INGRS, generator=torch.Generator().manual_seed(321))
        self.dish = torch.randint(0, N_DISHES, (n,), generator=g)
        self.ingrs = torch.zeros(n, N_INGRS)
        for i in range(n):
            scores = dish_protos[self.dish[i]] + 0.5 * torch.rand(N_INGRS, generator=g)
            k = int(torch.randint(3, MAX_INGRS + 1, (1,), generator=g))
            self.ingrs[i, scores.topk(k).indices] = 1.0
        self.feats = self.ingrs @ ingr_dirs / 2.0 + 0.3 * torch.randn(n, FEAT_DIM, generator=g)

    def __len__(self):
        return len(self.dish)

    def __getitem__(self, i):
        return self.feats[i], self.ingrs[i], self.dish[i]


class ImageEncoder(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEAT_DIM, hidden), nn.ReLU(), nn.Linear(hidden, hidden))

    def forward(self, x):
        return self.net(x)


class IngredientDecoder(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(N_INGRS + 1, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, N_INGRS)
        self.start = N_INGRS

    def forward(self, img_feats, max_len=MAX_INGRS):
        h = img_feats
        token = torch.full((img_feats.size(0),), self.start, dtype=torch.long)
        logits = []
        for _ in range(max_len):
            h = self.cell(self.embed(token), h)
            step_logits = self.out(h)
            logits.append(step_logits)
            token = step_logits.argmax(dim=-1)
        logits = torch.stack(logits, 1).data
        return logits


class InverseCookingModel(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.encoder = ImageEncoder(hidden)
        self.ingr_decoder = IngredientDecoder(hidden)
        self.dish_head = nn.Linear(hidden, N_DISHES)

    def forward(self, feats):
        img = self.encoder(feats)
        ingr_logits = self.ingr_decoder(img)
        return ingr_logits, self.dish_head(img)


def ingredient_set_loss(ingr_logits, target):
    probs = F.softmax(ingr_logits, dim=-1).max(dim=1).values
    return F.binary_cross_entropy(probs.clamp(1e-6, 1 - 1e-6), target)


def ingredient_f1(ingr_logits, target):
    pred = torch.zeros_like(target)
    pred.scatter_(1, ingr_logits.argmax(dim=-1), 1.0)
    tp = (pred * target).sum()
    return (2 * tp / (pred.sum() + target.sum())).item()


def main():
    train_loader = DataLoader(RecipeFeatures(2000, seed=0), batch_size=32, shuffle=True)
    val_set = RecipeFeatures(400, seed=1)

    model = InverseCookingModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    dish_weight = 0.1

    for epoch in range(3):
        model.train()
        ingr_total = dish_total = 0.0
        n = 0
        for feats, ingrs, dish in train_loader:
            ingr_logits, dish_logits = model(feats)
            ingr_loss = ingredient_set_loss(ingr_logits, ingrs)
            dish_loss = F.cross_entropy(dish_logits, dish)
            loss = ingr_loss + dish_weight * dish_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ingr_total += ingr_loss.item()
            dish_total += dish_loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            ingr_logits, dish_logits = model(val_set.feats)
            val_ingr = ingredient_set_loss(ingr_logits, val_set.ingrs).item()
            f1 = ingredient_f1(ingr_logits, val_set.ingrs)
            dish_acc = (dish_logits.argmax(1) == val_set.dish).float().mean().item()
        print(f"epoch {epoch}: train ingr_loss {ingr_total / n:.4f}  dish_loss {dish_total / n:.4f}  "
              f"val ingr_loss {val_ingr:.4f}  ingr F1 {f1:.3f}  dish acc {dish_acc:.3f}")


if __name__ == "__main__":
    main()
