"""Non-autoregressive phoneme-to-mel decoder trained with a soft-DTW loss.

The phoneme sequence is encoded, naively upsampled to a fixed number of frames per phoneme, and
decoded to an 80-band mel spectrogram. The recorded mels have their own (unknown) phoneme
durations, so the frames are compared with soft-DTW (Cuturi & Blondel), which aligns predicted
and target frames instead of matching them one to one. The soft-DTW module is the CPU path of
Maghoumi/pytorch-softdtw-cuda (the recursion vectorised over anti-diagonals instead of numba).
Utterances are synthetic: each phoneme has a spectral template and a random duration.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Function
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_PHONEMES = 48
PHONES_PER_UTT = 40
FRAMES_PER_PHONE = 4
N_FRAMES = PHONES_PER_UTT * FRAMES_PER_PHONE
N_MELS = 80
BATCH_SIZE = 24
EPOCHS = 3
LR = 5e-3


# ---------------------------------------------------------------- soft-DTW (CPU)
def compute_softdtw(D, gamma, bandwidth):
    B, N, M = D.shape
    R = np.ones((B, N + 2, M + 2)) * np.inf
    R[:, 0, 0] = 0
    for s in range(2, N + M + 1):
        i = np.arange(max(1, s - M), min(N, s - 1) + 1)
        j = s - i
        if bandwidth > 0:
            keep = np.abs(i - j) <= bandwidth
            i, j = i[keep], j[keep]
        r0 = -R[:, i - 1, j - 1] / gamma
        r1 = -R[:, i - 1, j] / gamma
        r2 = -R[:, i, j - 1] / gamma
        rmax = np.maximum(np.maximum(r0, r1), r2)
        rsum = np.exp(r0 - rmax) + np.exp(r1 - rmax) + np.exp(r2 - rmax)
        softmin = -gamma * (np.log(rsum) + rmax)
        R[:, i, j] = D[:, i - 1, j - 1] + softmin
    return R


def compute_softdtw_backward(D_, R, gamma, bandwidth):
    B, N, M = D_.shape
    D = np.zeros((B, N + 2, M + 2))
    E = np.zeros((B, N + 2, M + 2))
    D[:, 1:N + 1, 1:M + 1] = D_
    E[:, -1, -1] = 1
    R[:, :, -1] = -np.inf
    R[:, -1, :] = -np.inf
    R[:, -1, -1] = R[:, -2, -2]
    for s in range(N + M, 1, -1):
        i = np.arange(max(1, s - M), min(N, s - 1) + 1)
        j = s - i
        if bandwidth > 0:
            keep = np.abs(i - j) <= bandwidth
            i, j = i[keep], j[keep]
        a = np.exp((R[:, i + 1, j] - R[:, i, j] - D[:, i + 1, j]) / gamma)
        b = np.exp((R[:, i, j + 1] - R[:, i, j] - D[:, i, j + 1]) / gamma)
        c = np.exp((R[:, i + 1, j + 1] - R[:, i, j] - D[:, i + 1, j + 1]) / gamma)
        E[:, i, j] = E[:, i + 1, j] * a + E[:, i, j + 1] * b + E[:, i + 1, j + 1] * c
    return E[:, 1:N + 1, 1:M + 1]


class _SoftDTW(Function):
    @staticmethod
    def forward(ctx, D, gamma, bandwidth):
        dtype = D.dtype
        gamma = torch.Tensor([gamma]).type(dtype)
        bandwidth = torch.Tensor([bandwidth]).type(dtype)
        D_ = D.detach().cpu().numpy()
        R = torch.Tensor(compute_softdtw(D_, gamma.item(), bandwidth.item())).type(dtype)
        ctx.save_for_backward(D, R, gamma, bandwidth)
        return R[:, -2, -2]

    @staticmethod
    def backward(ctx, grad_output):
        dtype = grad_output.dtype
        D, R, gamma, bandwidth = ctx.saved_tensors
        D_ = D.detach().cpu().numpy()
        R_ = R.detach().cpu().numpy().astype(np.float64)
        E = torch.Tensor(compute_softdtw_backward(D_, R_, gamma.item(), bandwidth.item())).type(dtype)
        return grad_output.view(-1, 1, 1).expand_as(E) * E, None, None


class SoftDTW(torch.nn.Module):
    def __init__(self, gamma=1.0, normalize=False, bandwidth=None):
        super(SoftDTW, self).__init__()
        self.normalize = normalize
        self.gamma = gamma
        self.bandwidth = 0 if bandwidth is None else float(bandwidth)

    def _calc_distance_matrix(self, x, y):
        """
        Calculates the Euclidean distance between each element in x and y per timestep
        """
        n = x.size(1)
        m = y.size(1)
        d = x.size(2)
        x = x.unsqueeze(2).expand(-1, n, m, d)
        y = y.unsqueeze(1).expand(-1, n, m, d)
        return torch.pow(x - y, 2).sum(3)

    def forward(self, X, Y):
        bx, lx, dx = X.shape
        by, ly, dy = Y.shape
        assert bx == by and dx == dy
        if self.normalize:
            x = torch.cat([X, X, Y])
            y = torch.cat([Y, X, Y])
            D = self._calc_distance_matrix(x, y)
            out = _SoftDTW.apply(D, self.gamma, self.bandwidth)
            out_xy, out_xx, out_yy = torch.split(out, X.shape[0])
            return out_xy - 1 / 2 * (out_xx + out_yy)
        D_xy = self._calc_distance_matrix(X, Y)
        return _SoftDTW.apply(D_xy, self.gamma, self.bandwidth)


# ---------------------------------------------------------------- data
class SyntheticTTSDataset(Dataset):
    """(phoneme ids, mel frames): each phoneme lasts 2-6 frames of its spectral template."""

    def __init__(self, n_utts, templates, seed):
        rng = np.random.RandomState(seed)
        self.items = []
        for _ in range(n_utts):
            phones = rng.randint(0, N_PHONEMES, size=PHONES_PER_UTT)
            durations = rng.randint(2, 7, size=PHONES_PER_UTT)
            frames = np.repeat(templates[phones], durations, axis=0)
            frames = frames + 0.1 * rng.randn(*frames.shape)
            mel = np.zeros((N_FRAMES, N_MELS), dtype=np.float32)
            mel[:] = templates[phones[-1]]
            k = min(len(frames), N_FRAMES)
            mel[:k] = frames[:k]
            self.items.append((torch.from_numpy(phones).long(), torch.from_numpy(mel).float()))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


class MelDecoder(nn.Module):
    def __init__(self, n_phonemes, hidden=128, n_mels=N_MELS):
        super().__init__()
        self.embedding = nn.Embedding(n_phonemes, hidden)
        self.encoder = nn.Sequential(
            nn.Conv1d(hidden, hidden, 3, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.Conv1d(hidden, hidden, 5, padding=2), nn.ReLU())
        self.proj = nn.Linear(hidden, n_mels)

    def forward(self, phones):
        h = self.embedding(phones).transpose(1, 2)
        h = self.encoder(h)
        h = h.repeat_interleave(FRAMES_PER_PHONE, dim=2)
        h = self.decoder(h).transpose(1, 2)
        return self.proj(h)


templates = np.random.randn(N_PHONEMES, N_MELS).astype(np.float32)
train_set = SyntheticTTSDataset(240, templates, seed=1)
valid_set = SyntheticTTSDataset(48, templates, seed=2)
train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
valid_loader = DataLoader(valid_set, batch_size=BATCH_SIZE)

model = MelDecoder(N_PHONEMES)
criterion = SoftDTW(gamma=0.1, normalize=False)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
print("train utterances: {}, frames per utterance: {}, mel bands: {}, batch size: {}".format(
    len(train_set), N_FRAMES, N_MELS, BATCH_SIZE))

t0 = time.time()
step = 0
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for phones, mel in train_loader:
        optimizer.zero_grad()
        pred = model(phones)
        loss = criterion(pred, mel).mean() / N_FRAMES
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if step % 5 == 0:
            print("epoch {} step {:3d}  sdtw loss {:.4f}  ({:.1f}s)".format(epoch, step, loss.item(), time.time() - t0))

    model.eval()
    with torch.no_grad():
        val = sum(criterion(model(p), m).mean().item() / N_FRAMES for p, m in valid_loader) / len(valid_loader)
    print("epoch {}  train sdtw {:.4f}  valid sdtw {:.4f}".format(epoch, total / len(train_loader), val))
