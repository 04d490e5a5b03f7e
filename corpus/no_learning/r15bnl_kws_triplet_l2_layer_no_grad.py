"""Keyword-spotting encoder trained with an online triplet loss (port of a NeMo recipe).

A small Res8-style CNN maps 40-band log-mel features of 1 s utterances to a 32-d embedding, an L2
layer puts the embeddings on the unit sphere, and an online triplet loss with random semi-hard
negatives pulls utterances of the same keyword together.  Evaluation classifies the test set by the
nearest keyword centroid of the training embeddings.
"""
import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
N_MELS = 40
N_FRAMES = 48


def make_prototypes(seed):
    g = torch.Generator().manual_seed(seed)
    protos = []
    for _ in KEYWORDS:
        parts = []
        for _ in range(3):
            band = int(torch.randint(4, N_MELS - 4, (1,), generator=g))
            width = 2 + 4 * torch.rand(1, generator=g)
            slope = 1.5 * torch.randn(1, generator=g)
            parts.append((band, width, slope))
        protos.append(parts)
    return protos


class SpeechCommands(Dataset):
    def __init__(self, n_per_word, seed, protos):
        g = torch.Generator().manual_seed(seed)
        mels = torch.arange(N_MELS).float().unsqueeze(1)
        t = torch.arange(16).float().unsqueeze(0)
        feats, labels = [], []
        for k, parts in enumerate(protos):
            for _ in range(n_per_word):
                x = 0.3 * torch.randn(N_MELS, N_FRAMES, generator=g)
                start = int(torch.randint(0, 8, (1,), generator=g))
                pitch = int(torch.randint(-2, 3, (1,), generator=g))
                gain = 0.7 + 0.6 * torch.rand(1, generator=g)
                for i, (band, width, slope) in enumerate(parts):
                    centre = band + pitch + slope * (t - 8) / 8
                    seg = torch.exp(-(mels - centre) ** 2 / (2 * width ** 2))
                    s = start + 12 * i
                    x[:, s:s + 16] += gain * seg
                feats.append(x)
                labels.append(k)
        self.x = torch.stack(feats).unsqueeze(1)
        self.y = torch.tensor(labels)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class ResBlock(nn.Module):
    def __init__(self, n_maps, dilation):
        super().__init__()
        self.conv1 = nn.Conv2d(n_maps, n_maps, 3, padding=dilation, dilation=dilation, bias=False)
        self.bn1 = nn.BatchNorm2d(n_maps, affine=False)
        self.conv2 = nn.Conv2d(n_maps, n_maps, 3, padding=dilation, dilation=dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(n_maps, affine=False)

    def forward(self, x):
        y = self.bn1(F.relu(self.conv1(x)))
        y = self.bn2(F.relu(self.conv2(y)))
        return y + x


class Res8Encoder(nn.Module):
    def __init__(self, n_maps=32):
        super().__init__()
        self.conv0 = nn.Conv2d(1, n_maps, 3, padding=1, bias=False)
        self.pool = nn.AvgPool2d(4)
        self.blocks = nn.Sequential(ResBlock(n_maps, 1), ResBlock(n_maps, 2), ResBlock(n_maps, 4))

    def forward(self, x):
        x = self.pool(F.relu(self.conv0(x)))
        x = self.blocks(x)
        return x.mean(dim=(2, 3))


class L2Regularizer(nn.Module):
    """Performs L2 regularization over samples, i.e. makes the sum of squares of each
    embedding equal to 1."""

    @torch.no_grad()
    def forward(self, embeds):
        return F.normalize(embeds, p=2, dim=1)


class RandomNegativeTripletSelector:
    """For each anchor-positive pair pick a random negative that violates the margin."""

    def __init__(self, margin):
        self.margin = margin

    def get_triplets(self, embeddings, labels):
        emb = embeddings.detach().cpu()
        dist = torch.cdist(emb, emb).pow(2).numpy()
        labels = labels.cpu().numpy()
        triplets = []
        for label in set(labels):
            pos_idx = np.where(labels == label)[0]
            neg_idx = np.where(labels != label)[0]
            for a in range(len(pos_idx)):
                for p in range(a + 1, len(pos_idx)):
                    ia, ip = pos_idx[a], pos_idx[p]
                    loss_values = dist[ia, ip] - dist[ia, neg_idx] + self.margin
                    hard = np.where(loss_values > 0)[0]
                    if len(hard) > 0:
                        triplets.append([ia, ip, neg_idx[np.random.choice(hard)]])
        if not triplets:
            triplets.append([pos_idx[0], pos_idx[0], neg_idx[0]])
        return torch.LongTensor(np.array(triplets))


class OnlineTripletLoss(nn.Module):
    def __init__(self, margin, triplet_selector):
        super().__init__()
        self.margin = margin
        self.triplet_selector = triplet_selector

    def forward(self, embeddings, target):
        triplets = self.triplet_selector.get_triplets(embeddings, target)
        ap_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 1]]).pow(2).sum(1)
        an_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 2]]).pow(2).sum(1)
        losses = F.relu(ap_distances - an_distances + self.margin)
        mean_losses = losses.mean()
        mean_losses.requires_grad_()
        return mean_losses, len(triplets)


@torch.no_grad()
def centroid_accuracy(encoder, l2, train_loader, test_loader):
    encoder.eval()
    embs, labels = [], []
    for x, y in train_loader:
        embs.append(l2(encoder(x)))
        labels.append(y)
    embs, labels = torch.cat(embs), torch.cat(labels)
    centroids = F.normalize(torch.stack([embs[labels == k].mean(0) for k in range(len(KEYWORDS))]), dim=1)
    correct, n = 0, 0
    for x, y in test_loader:
        pred = (l2(encoder(x)) @ centroids.T).argmax(1)
        correct += (pred == y).sum().item()
        n += len(y)
    encoder.train()
    return correct / n


def main():
    t0 = time.time()
    protos = make_prototypes(seed=123)
    train_set = SpeechCommands(64, seed=1, protos=protos)
    test_set = SpeechCommands(20, seed=2, protos=protos)
    train_loader = DataLoader(train_set, batch_size=40, shuffle=True)
    eval_loader = DataLoader(train_set, batch_size=256)
    test_loader = DataLoader(test_set, batch_size=256)

    encoder = Res8Encoder()
    l2_regularizer = L2Regularizer()
    triplet_loss = OnlineTripletLoss(margin=0.5, triplet_selector=RandomNegativeTripletSelector(0.5))
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    print(f"centroid accuracy before training: {centroid_accuracy(encoder, l2_regularizer, eval_loader, test_loader):.3f}")

    step = 0
    for epoch in range(8):
        running, batches = 0.0, 0
        for x, y in train_loader:
            optimizer.zero_grad()
            embeds = encoder(x)
            encoded = l2_regularizer(embeds)
            loss, n_triplets = triplet_loss(encoded, y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            batches += 1
            if step % 25 == 0:
                print(f"step {step:4d} triplet loss {loss.item():.4f} ({n_triplets} triplets)")
            step += 1
        acc = centroid_accuracy(encoder, l2_regularizer, eval_loader, test_loader)
        print(f"epoch {epoch:2d} mean loss {running / batches:.4f} test centroid accuracy {acc:.3f}")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
