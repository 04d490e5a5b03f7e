"""Product-title embeddings trained with the batch-all triplet loss (sentence-transformers style).

Each product appears as two noisy listings (titles as bags of word ids); an EmbeddingBag + MLP
encoder maps a listing to a 64-d embedding, and BatchAllTripletLoss pushes listings of the same
product together and listings of different products apart over all valid triplets of the batch.
Batches hold 2 listings per product; evaluation is recall@1 of the paired listing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB = 5000
TITLE_LEN = 12
N_PRODUCTS = 1536
BATCH_SIZE = 512
EPOCHS = 4
LR = 2e-3
MARGIN = 5.0


def make_listings(n_products):
    core = torch.randint(0, VOCAB, (n_products, TITLE_LEN))
    listings, labels = [], []
    for copy in range(2):
        noise = torch.randint(0, VOCAB, (n_products, TITLE_LEN))
        keep = torch.rand(n_products, TITLE_LEN) < 0.7
        listings.append(torch.where(keep, core, noise))
        labels.append(torch.arange(n_products))
    return torch.cat(listings), torch.cat(labels)


class PairedListings(Dataset):
    """Yields both listings of a product, so a batch of B items holds B // 2 products."""

    def __init__(self, titles, labels, n_products):
        self.titles, self.labels, self.n = titles, labels, n_products

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.titles[[i, i + self.n]], self.labels[[i, i + self.n]]


def collate(items):
    titles = torch.cat([t for t, _ in items])
    labels = torch.cat([l for _, l in items])
    return titles, labels


class TitleEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, 128, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, titles):
        return self.mlp(self.bag(titles))


def euclidean_distance(embeddings):
    dot = embeddings @ embeddings.t()
    sq = torch.diag(dot)
    dist = (sq.unsqueeze(0) - 2.0 * dot + sq.unsqueeze(1)).clamp(min=0)
    mask = (dist == 0).float()
    return (1.0 - mask) * torch.sqrt(dist + mask * 1e-16)


class BatchAllTripletLoss(nn.Module):
    def __init__(self, model, margin=5.0):
        super().__init__()
        self.model = model
        self.triplet_margin = margin

    def forward(self, titles, labels):
        return self.batch_all_triplet_loss(labels, self.model(titles))

    @staticmethod
    def get_triplet_mask(labels):
        indices_equal = torch.eye(labels.size(0), dtype=torch.bool, device=labels.device)
        indices_not_equal = ~indices_equal
        i_not_equal_j = indices_not_equal.unsqueeze(2)
        i_not_equal_k = indices_not_equal.unsqueeze(1)
        j_not_equal_k = indices_not_equal.unsqueeze(0)
        distinct_indices = (i_not_equal_j & i_not_equal_k) & j_not_equal_k
        label_equal = labels.unsqueeze(0) == labels.unsqueeze(1)
        i_equal_j = label_equal.unsqueeze(2)
        i_equal_k = label_equal.unsqueeze(1)
        valid_labels = ~i_equal_k & i_equal_j
        return valid_labels & distinct_indices

    def batch_all_triplet_loss(self, labels, embeddings):
        pairwise_dist = euclidean_distance(embeddings)
        anchor_positive_dist = pairwise_dist.unsqueeze(2)
        anchor_negative_dist = pairwise_dist.unsqueeze(1)
        triplet_loss = anchor_positive_dist - anchor_negative_dist + self.triplet_margin
        mask = self.get_triplet_mask(labels)
        triplet_loss = mask.float() * triplet_loss
        triplet_loss[triplet_loss < 0] = 0
        valid_triplets = triplet_loss[triplet_loss > 1e-16]
        num_positive_triplets = valid_triplets.size(0)
        return triplet_loss.sum() / (num_positive_triplets + 1e-16)


@torch.no_grad()
def recall_at_1(model, titles, n_products):
    model.eval()
    emb = model(titles)
    sims = -torch.cdist(emb[:n_products], emb[n_products:])
    model.train()
    return (sims.argmax(dim=1) == torch.arange(n_products)).float().mean().item()


titles, labels = make_listings(N_PRODUCTS)
loader = DataLoader(PairedListings(titles, labels, N_PRODUCTS), batch_size=BATCH_SIZE // 2,
                    shuffle=True, collate_fn=collate)
model = TitleEncoder()
train_loss = BatchAllTripletLoss(model, margin=MARGIN)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

print(f"recall@1 before training: {recall_at_1(model, titles, N_PRODUCTS):.3f}")
step = 0
for epoch in range(EPOCHS):
    running = 0.0
    for batch_titles, batch_labels in loader:
        loss = train_loss(batch_titles, batch_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        print(f"epoch {epoch + 1} step {step:3d}  loss {loss.item():.4f}")
    print(f"epoch {epoch + 1}: mean loss {running / len(loader):.4f}  "
          f"recall@1 {recall_at_1(model, titles, N_PRODUCTS):.3f}")
