"""VSE++ style image-caption retrieval on precomputed image features.

Images are precomputed feature vectors (like the *_precomp data of VSE++), captions are
variable-length word-id sequences. A linear image encoder and a GRU caption encoder map both
into a joint space trained with the hinge-based contrastive loss; validation reports R@1/R@5
for image->caption retrieval.

The synthetic data: every scene has a color, a shape and a place; the image feature is the sum
of the three concept vectors plus noise, the caption names the three concepts between a
variable number of filler words.
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_COLOR, N_SHAPE, N_PLACE = 8, 8, 6
FILLERS = 12
PAD = 0
VOCAB = 1 + N_COLOR + N_SHAPE + N_PLACE + FILLERS
IMG_DIM = 128
EMBED = 128


class PrecompCaptions(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        concept_vecs = torch.randn(N_COLOR + N_SHAPE + N_PLACE, IMG_DIM,
                                   generator=torch.Generator().manual_seed(99))
        self.images, self.captions = [], []
        for _ in range(n):
            c = int(torch.randint(N_COLOR, (1,), generator=g))
            s = int(torch.randint(N_SHAPE, (1,), generator=g))
            p = int(torch.randint(N_PLACE, (1,), generator=g))
            img = concept_vecs[c] + concept_vecs[N_COLOR + s] + concept_vecs[N_COLOR + N_SHAPE + p]
            self.images.append(img + 0.5 * torch.randn(IMG_DIM, generator=g))
            words = [1 + c, 1 + N_COLOR + s, 1 + N_COLOR + N_SHAPE + p]
            n_fill = int(torch.randint(1, 9, (1,), generator=g))
            fill = (1 + N_COLOR + N_SHAPE + N_PLACE
                    + torch.randint(FILLERS, (n_fill,), generator=g)).tolist()
            tokens = fill[: n_fill // 2] + words + fill[n_fill // 2:]
            self.captions.append(torch.tensor(tokens))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.captions[i]


def collate_fn(batch):
    images = torch.stack([b[0] for b in batch])
    lengths = torch.tensor([len(b[1]) for b in batch])
    captions = torch.full((len(batch), int(lengths.max())), PAD, dtype=torch.long)
    for i, (_, cap) in enumerate(batch):
        captions[i, : len(cap)] = cap
    return images, captions, lengths


def l2norm(x):
    return x / x.pow(2).sum(dim=1, keepdim=True).sqrt()


class EncoderImagePrecomp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(IMG_DIM, EMBED)

    def forward(self, images):
        return l2norm(self.fc(images))


class EncoderText(nn.Module):
    def __init__(self, word_dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, word_dim, padding_idx=PAD)
        self.rnn = nn.GRU(word_dim, EMBED, batch_first=True)

    def forward(self, captions, lengths):
        lengths, sort_idx = lengths.sort(descending=True)
        x = self.embed(captions[sort_idx])
        packed = pack_padded_sequence(x, lengths, batch_first=True)
        _, h = self.rnn(packed)
        out = l2norm(h[-1])
        return out


class ContrastiveLoss(nn.Module):
    def __init__(self, margin=0.2):
        super().__init__()
        self.margin = margin

    def forward(self, im, s):
        scores = im @ s.t()
        diagonal = scores.diag().view(-1, 1)
        cost_s = (self.margin + scores - diagonal).clamp(min=0)
        cost_im = (self.margin + scores - diagonal.t()).clamp(min=0)
        mask = torch.eye(scores.size(0), dtype=torch.bool)
        cost_s = cost_s.masked_fill(mask, 0)
        cost_im = cost_im.masked_fill(mask, 0)
        return cost_s.sum() + cost_im.sum()


def i2t_recall(img_enc, txt_enc, loader):
    img_enc.eval()
    txt_enc.eval()
    ims, caps = [], []
    with torch.no_grad():
        for images, captions, lengths in loader:
            ims.append(img_enc(images))
            caps.append(txt_enc(captions, lengths))
    sims = torch.cat(ims) @ torch.cat(caps).t()
    ranks = (sims > sims.diag().view(-1, 1)).sum(1)
    return (ranks < 1).float().mean().item(), (ranks < 5).float().mean().item()


def main():
    train_loader = DataLoader(PrecompCaptions(3200, seed=0), batch_size=64, shuffle=True,
                              collate_fn=collate_fn)
    val_loader = DataLoader(PrecompCaptions(500, seed=1), batch_size=100, collate_fn=collate_fn)

    img_enc = EncoderImagePrecomp()
    txt_enc = EncoderText()
    criterion = ContrastiveLoss(margin=0.2)
    params = list(txt_enc.parameters()) + list(img_enc.fc.parameters())
    optimizer = torch.optim.Adam(params, lr=2e-4)

    for epoch in range(4):
        img_enc.train()
        txt_enc.train()
        total, n = 0.0, 0
        for i, (images, captions, lengths) in enumerate(train_loader):
            img_emb = img_enc(images)
            cap_emb = txt_enc(captions, lengths)
            loss = criterion(img_emb, cap_emb)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 2.0)
            optimizer.step()
            total += loss.item()
            n += 1
            if i % 10 == 0:
                print(f"epoch {epoch} iter {i}: loss {loss.item():.3f}")
        r1, r5 = i2t_recall(img_enc, txt_enc, val_loader)
        print(f"epoch {epoch}: train loss {total / n:.3f}  val i2t R@1 {r1:.3f}  R@5 {r5:.3f}")


if __name__ == "__main__":
    main()
