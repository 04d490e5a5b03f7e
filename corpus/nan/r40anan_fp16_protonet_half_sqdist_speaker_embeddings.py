"""Few-shot speaker identification with a prototypical network on pre-extracted utterance
embeddings (x-vector style, 1024-d). Episodes are 5-way 5-shot with 10 queries per speaker.
The whole network runs in half precision to fit bigger episodes on the card."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

FEAT_DIM = 1024
EMB_DIM = 512
N_SPEAKERS = 200
UTTS_PER_SPEAKER = 30
N_WAY = 5
N_SHOT = 5
N_QUERY = 10
EPISODES_PER_EPOCH = 50
EPOCHS = 3
LR = 1e-3
SCALE = 20.0


def make_speakers(n_spk, n_utt, dim):
    rng = np.random.default_rng(0)
    base = rng.gamma(2.0, 1.0, size=dim)
    centers = base[None, :] * rng.lognormal(0.0, 0.2, size=(n_spk, dim))
    feats = centers[:, None, :] * rng.lognormal(0.0, 0.4, size=(n_spk, n_utt, dim))
    return (SCALE * feats).astype(np.float32)


class EpisodeSampler:
    def __init__(self, feats, speakers, n_way, n_shot, n_query, seed):
        self.feats = torch.from_numpy(feats)
        self.speakers = speakers
        self.n_way, self.n_shot, self.n_query = n_way, n_shot, n_query
        self.rng = np.random.default_rng(seed)

    def sample(self):
        spk = self.rng.choice(self.speakers, self.n_way, replace=False)
        support, query = [], []
        for s in spk:
            idx = self.rng.permutation(self.feats.size(1))[: self.n_shot + self.n_query]
            support.append(self.feats[s, idx[: self.n_shot]])
            query.append(self.feats[s, idx[self.n_shot:]])
        support = torch.stack(support)
        query = torch.cat(query)
        labels = torch.arange(self.n_way).repeat_interleave(self.n_query)
        return support, query, labels


class Encoder(nn.Module):
    def __init__(self, in_dim, emb_dim):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, 1024),
            nn.ReLU(),
            nn.Linear(1024, 1024),
            nn.ReLU(),
            nn.Linear(1024, emb_dim),
        )

    def forward(self, x):
        return self.net(x)


def proto_loss(encoder, support, query, labels):
    n_way, n_shot, dim = support.shape
    dim_scale = EMB_DIM
    emb_s = encoder(support.view(-1, dim)).view(n_way, n_shot, -1)
    protos = emb_s.mean(1)
    emb_q = encoder(query)
    dists = (emb_q ** 2).sum(1, keepdim=True) + (protos ** 2).sum(1)[None, :] - 2 * emb_q @ protos.t()
    log_p = F.log_softmax(-dists.float() / dim_scale, dim=1)
    loss = F.nll_loss(log_p, labels)
    acc = (log_p.argmax(1) == labels).float().mean()
    return loss, acc


feats = make_speakers(N_SPEAKERS, UTTS_PER_SPEAKER, FEAT_DIM)
train_sampler = EpisodeSampler(feats, np.arange(160), N_WAY, N_SHOT, N_QUERY, seed=1)
val_sampler = EpisodeSampler(feats, np.arange(160, 200), N_WAY, N_SHOT, N_QUERY, seed=2)

encoder = Encoder(FEAT_DIM, EMB_DIM).half()
optimizer = torch.optim.SGD(encoder.parameters(), lr=LR, momentum=0.9)

step = 0
for epoch in range(EPOCHS):
    encoder.train()
    tot_loss, tot_acc = 0.0, 0.0
    for _ in range(EPISODES_PER_EPOCH):
        support, query, labels = train_sampler.sample()
        loss, acc = proto_loss(encoder, support.half(), query.half(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tot_loss += loss.item()
        tot_acc += acc.item()
        step += 1
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} acc {acc.item():.3f}")
    encoder.eval()
    val_acc = 0.0
    with torch.no_grad():
        for _ in range(20):
            support, query, labels = val_sampler.sample()
            _, acc = proto_loss(encoder, support.half(), query.half(), labels)
            val_acc += acc.item()
    print(f"epoch {epoch + 1} train loss {tot_loss / EPISODES_PER_EPOCH:.4f} "
          f"train acc {tot_acc / EPISODES_PER_EPOCH:.3f} val acc {val_acc / 20:.3f}")
