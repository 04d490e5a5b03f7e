"""Fine-tune the decoder head of a small Silero-style VAD (frozen STFT + encoder, LSTMCell decoder)
on synthetic 16 kHz clips with frame-level speech annotations."""
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

SR = 16000
NUM_SAMPLES = 512
CONTEXT = 64
CLIP_WINDOWS = 16


class Config:
    noise_loss = 0.5
    learning_rate = 3e-3
    batch_size = 16
    num_epochs = 6
    n_train = 192
    n_val = 64


def make_clip(rng):
    n = CLIP_WINDOWS * NUM_SAMPLES
    t = np.arange(n) / SR
    wav = rng.normal(0, 0.02 + 0.03 * rng.random(), n)
    speech_ts = []
    pos = rng.uniform(0, 0.2)
    while pos < n / SR - 0.15:
        dur = rng.uniform(0.12, 0.35)
        end = min(pos + dur, n / SR)
        speech_ts.append({'start': pos, 'end': end})
        a, b = int(pos * SR), int(end * SR)
        f0 = rng.uniform(110, 260)
        seg = np.zeros(b - a)
        for h in range(1, 8):
            seg += np.sin(2 * math.pi * f0 * h * t[a:b] + rng.uniform(0, 6.28)) / h
        env = np.sin(np.linspace(0, math.pi, b - a)) ** 0.5
        wav[a:b] += 0.15 * rng.uniform(0.6, 1.4) * seg * env
        pos = end + rng.uniform(0.1, 0.4)
    return wav.astype(np.float32), speech_ts


class SileroVadDataset(Dataset):
    def __init__(self, config, mode='train'):
        self.noise_loss = config.noise_loss
        rng = np.random.default_rng(1 if mode == 'train' else 2)
        n = config.n_train if mode == 'train' else config.n_val
        self.items = [make_clip(rng) for _ in range(n)]
        print(f'DATASET SIZE : {len(self.items)}')

    def __len__(self):
        return len(self.items)

    def get_ground_truth_annotated(self, annotation, audio_length_samples):
        gt = np.zeros(audio_length_samples)
        for i in annotation:
            gt[int(i['start'] * SR): int(i['end'] * SR)] = 1
        squeezed = np.average(gt.reshape(-1, NUM_SAMPLES), axis=1)
        squeezed = (squeezed > 0.5).astype(int)
        mask = np.ones(len(squeezed))
        mask[squeezed == 0] = self.noise_loss
        return squeezed, mask

    def __getitem__(self, idx):
        wav, ts = self.items[idx]
        gt, mask = self.get_ground_truth_annotated(ts, len(wav))
        return torch.from_numpy(wav), torch.FloatTensor(gt), torch.from_numpy(mask).float()


def SileroVadPadder(batch):
    wavs = nn.utils.rnn.pad_sequence([b[0] for b in batch], batch_first=True)
    labels = nn.utils.rnn.pad_sequence([b[1] for b in batch], batch_first=True)
    masks = nn.utils.rnn.pad_sequence([b[2] for b in batch], batch_first=True)
    return wavs, labels, masks


class STFT(nn.Module):
    def __init__(self, filter_length=256, hop=128):
        super().__init__()
        self.hop = hop
        n = torch.arange(filter_length).float()
        k = torch.arange(filter_length // 2 + 1).float()[:, None]
        win = torch.hann_window(filter_length)
        basis = torch.cat([torch.cos(2 * math.pi * k * n / filter_length),
                           -torch.sin(2 * math.pi * k * n / filter_length)]) * win
        self.register_buffer('forward_basis', basis[:, None, :])

    def forward(self, x):
        x = nn.functional.pad(x, (0, 64), mode='reflect').unsqueeze(1)
        spec = nn.functional.conv1d(x, self.forward_basis, stride=self.hop)
        half = spec.shape[1] // 2
        mag = torch.sqrt(spec[:, :half] ** 2 + spec[:, half:] ** 2 + 1e-9)
        return torch.log(mag + 1e-3)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv1d(129, 128, 3, padding=1), nn.ReLU(),
            nn.Conv1d(128, 128, 3, stride=2, padding=1), nn.ReLU())

    def forward(self, x):
        return self.layers(x).mean(dim=2, keepdim=True)


class VADDecoderRNNJIT(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTMCell(128, 128)
        self.decoder = nn.Sequential(nn.Dropout(0.1), nn.ReLU(),
                                     nn.Conv1d(128, 1, kernel_size=1), nn.Sigmoid())

    def forward(self, x, state=torch.zeros(0)):
        x = x.squeeze(-1)
        if len(state):
            h, c = self.rnn(x, (state[0], state[1]))
        else:
            h, c = self.rnn(x)
        x = h.unsqueeze(-1).float()
        state = torch.stack([h, c])
        return self.decoder(x), state


class SileroVAD(nn.Module):
    def __init__(self):
        super().__init__()
        self.stft = STFT()
        self.encoder = Encoder()
        self.decoder = VADDecoderRNNJIT()


def roc_auc_score(gts, predicts):
    y = np.asarray(gts)
    ranks = np.argsort(np.argsort(np.asarray(predicts))) + 1
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def run_chunks(x, stft_layer, encoder_layer, decoder):
    x = nn.functional.pad(x, (CONTEXT, 0))
    outs = []
    state = torch.zeros(0)
    for i in range(CONTEXT, x.shape[1], NUM_SAMPLES):
        input_ = x[:, i - CONTEXT:i + NUM_SAMPLES]
        out = stft_layer(input_)
        out = encoder_layer(out)
        out, state = decoder(out, state)
        outs.append(out)
    return torch.cat(outs, dim=2).squeeze(1)


def train(config, loader, jit_model, decoder, criterion, optimizer, epoch):
    losses = AverageMeter()
    decoder.train()
    for step, (x, targets, masks) in enumerate(loader):
        stacked = run_chunks(x, jit_model.stft, jit_model.encoder, decoder)
        loss = criterion(stacked, targets)
        loss = (loss * masks).mean()
        loss.backward()
        optimizer.step()
        losses.update(loss.item(), masks.numel())
        if step % 10 == 0:
            print(f'epoch {epoch + 1} step {step:3d} loss {loss.item():.4f}')
    return losses.avg


def validate(config, loader, jit_model, decoder, criterion):
    losses = AverageMeter()
    decoder.eval()
    predicts, gts = [], []
    with torch.no_grad():
        for x, targets, masks in loader:
            stacked = run_chunks(x, jit_model.stft, jit_model.encoder, decoder)
            predicts.extend(stacked[masks != 0].tolist())
            gts.extend(targets[masks != 0].tolist())
            loss = (criterion(stacked, targets) * masks).mean()
            losses.update(loss.item(), masks.numel())
    score = roc_auc_score(gts, predicts)
    acc = float(np.mean((np.array(predicts) > 0.5) == np.array(gts)))
    return losses.avg, round(score, 3), acc


if __name__ == '__main__':
    config = Config()
    train_loader = DataLoader(SileroVadDataset(config, 'train'), batch_size=config.batch_size,
                              shuffle=True, collate_fn=SileroVadPadder)
    val_loader = DataLoader(SileroVadDataset(config, 'val'), batch_size=config.batch_size,
                            collate_fn=SileroVadPadder)

    model = SileroVAD()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    print('Model loaded')

    decoder = VADDecoderRNNJIT()
    decoder.load_state_dict(model.decoder.state_dict())
    decoder.train()
    params = decoder.parameters()
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, params), lr=config.learning_rate)
    criterion = nn.BCELoss(reduction='none')

    best_val_roc = 0
    for i in range(config.num_epochs):
        train_loss = train(config, train_loader, model, decoder, criterion, optimizer, i)
        val_loss, val_roc, val_acc = validate(config, val_loader, model, decoder, criterion)
        print(f'Metrics after epoch {i + 1}: train loss {train_loss:.4f} '
              f'val loss {val_loss:.4f} val ROC-AUC {val_roc:.3f} val acc {val_acc:.3f}')
        if val_roc > best_val_roc:
            best_val_roc = val_roc
            model.decoder.load_state_dict(decoder.state_dict())
    print('Done, best val ROC-AUC', best_val_roc)
