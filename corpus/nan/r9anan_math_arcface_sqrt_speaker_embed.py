"""Speaker-identification embeddings trained with an ArcFace (additive angular margin)
head, following arcface-pytorch's ArcMarginProduct. The encoder maps a window of
log-mel frames to a small embedding; the head scores it against one learned centre
per speaker.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SpeakerFrames(Dataset):
    """Fixed-length windows of 24-band log-mel frames; each speaker has a spectral
    'voice print' plus per-utterance channel noise."""

    def __init__(self, n_speakers, per_speaker, frames=20, bands=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        prints = torch.randn(n_speakers, bands, generator=g) * 2.0
        xs, ys = [], []
        for spk in range(n_speakers):
            for _ in range(per_speaker):
                channel = 0.3 * torch.randn(bands, generator=g)
                frames_ = prints[spk] + channel + 0.5 * torch.randn(frames, bands, generator=g)
                xs.append(frames_)
                ys.append(spk)
        self.x = torch.stack(xs)
        self.y = torch.tensor(ys)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class SpeakerEncoder(nn.Module):
    def __init__(self, bands=24, hidden=64, emb_dim=3):
        super().__init__()
        self.frame_net = nn.Sequential(nn.Linear(bands, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.embedding = nn.Linear(hidden, emb_dim)

    def forward(self, x):
        h = self.frame_net(x).mean(dim=1)
        return self.embedding(h)


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super().__init__()
        self.s = s
        self.m = m
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.cos_m = math.cos(m)
        self.sin_m = math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt(1.0 - torch.pow(cosine, 2))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size())
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output *= self.s
        return output


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--speakers", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--emb-dim", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_set = SpeakerFrames(args.speakers, 120, seed=1)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)

    model = SpeakerEncoder(emb_dim=args.emb_dim)
    metric_fc = ArcMarginProduct(args.emb_dim, args.speakers, s=30, m=0.5)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD([{"params": model.parameters()}, {"params": metric_fc.parameters()}],
                                lr=args.lr, momentum=0.9, weight_decay=5e-4)

    start = time.time()
    it = 0
    for epoch in range(args.epochs):
        model.train()
        for data_input, label in loader:
            feature = model(data_input)
            output = metric_fc(feature, label)
            loss = criterion(output, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            it += 1
            if it % 10 == 0:
                acc = (output.argmax(1) == label).float().mean().item()
                print(f"train epoch {epoch} iter {it} loss {loss.item():.4f} acc {acc:.3f} ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
