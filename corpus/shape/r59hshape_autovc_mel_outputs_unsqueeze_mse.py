"""AutoVC (zero-shot voice conversion through an autoencoder bottleneck) trained on a small
custom speech set: 80-band mel-spectrograms in [0, 1] as written by make_spect.py, one
d-vector speaker embedding per speaker as written by make_metadata.py. The spectrograms
here are synthetic (formant tracks of a phone sequence, warped per speaker).
"""
import argparse
import time
import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import data

torch.manual_seed(0)
np.random.seed(0)


# --------------------------------------------------------------------------- make_spect / make_metadata
N_MELS = 80
PHONES = [(9, 30, 52), (14, 24, 50), (6, 38, 58), (18, 32, 55), (11, 44, 61), (22, 29, 48),
          (8, 20, 46), (16, 40, 57), (12, 35, 64), (20, 26, 53), (7, 42, 59), (15, 31, 45)]


def synth_utterance(rng, spk, n_frames):
    """Log-mel frames of a phone sequence spoken by speaker `spk` (formants warped by the
    speaker's vocal tract length, speaker tilt and harmonic ripple), scaled into [0, 1]."""
    bins = np.arange(N_MELS, dtype=np.float32)
    frames = []
    while len(frames) < n_frames:
        f1, f2, f3 = PHONES[rng.randint(len(PHONES))]
        voiced = rng.rand() < 0.8
        for _ in range(rng.randint(4, 11)):
            env = spk['floor'] + spk['tilt'] * (1.0 - bins / N_MELS)
            for k, (f, amp) in enumerate(((f1, 0.55), (f2, 0.4), (f3, 0.3))):
                c = f * spk['warp'] + rng.randn() * 0.6
                env = env + amp * np.exp(-0.5 * ((bins - c) / (2.0 + k)) ** 2)
            if voiced:
                env = env + 0.08 * np.cos(2 * np.pi * bins / spk['f0_period']) * (bins < 40)
            else:
                env = env * 0.6
            frames.append(env + 0.03 * rng.randn(N_MELS))
    S = np.stack(frames[:n_frames]).astype(np.float32)
    return np.clip(S, 0.0, 1.0)


def build_corpus(num_speakers=10, utts_per_speaker=7, dim_emb=64, seed=1):
    rng = np.random.RandomState(seed)
    metadata = []
    for s in range(num_speakers):
        spk = dict(warp=rng.uniform(0.75, 1.25), tilt=rng.uniform(-0.4, 0.4),
                   floor=rng.uniform(0.05, 0.6), f0_period=rng.uniform(3.0, 7.0))
        emb = rng.randn(dim_emb).astype(np.float32)
        emb /= np.linalg.norm(emb)
        uttrs = [synth_utterance(rng, spk, rng.randint(90, 160)) for _ in range(utts_per_speaker)]
        metadata.append(['p%03d' % (225 + s), emb] + uttrs)
    return metadata


# --------------------------------------------------------------------------- data_loader.py
class Utterances(data.Dataset):
    """Dataset class for the Utterances dataset."""

    def __init__(self, meta, len_crop):
        self.len_crop = len_crop
        self.train_dataset = [m[:-1] for m in meta]
        self.num_tokens = len(self.train_dataset)

    def __getitem__(self, index):
        # pick a random speaker
        dataset = self.train_dataset
        list_uttrs = dataset[index]
        emb_org = list_uttrs[1]

        # pick random uttr with random crop
        a = np.random.randint(2, len(list_uttrs))
        tmp = list_uttrs[a]
        if tmp.shape[0] < self.len_crop:
            len_pad = self.len_crop - tmp.shape[0]
            uttr = np.pad(tmp, ((0, len_pad), (0, 0)), 'constant')
        elif tmp.shape[0] > self.len_crop:
            left = np.random.randint(tmp.shape[0] - self.len_crop)
            uttr = tmp[left:left + self.len_crop, :]
        else:
            uttr = tmp
        return uttr, emb_org

    def __len__(self):
        """Return the number of spkrs."""
        return self.num_tokens


def get_loader(meta, batch_size=16, len_crop=128, num_workers=0):
    dataset = Utterances(meta, len_crop)
    return data.DataLoader(dataset=dataset, batch_size=batch_size, shuffle=True,
                           num_workers=num_workers, drop_last=True)


# --------------------------------------------------------------------------- model_vc.py
class LinearNorm(nn.Module):
    def __init__(self, in_dim, out_dim, bias=True, w_init_gain='linear'):
        super().__init__()
        self.linear_layer = nn.Linear(in_dim, out_dim, bias=bias)
        nn.init.xavier_uniform_(self.linear_layer.weight, gain=nn.init.calculate_gain(w_init_gain))

    def forward(self, x):
        return self.linear_layer(x)


class ConvNorm(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, padding=None,
                 dilation=1, bias=True, w_init_gain='linear'):
        super().__init__()
        if padding is None:
            padding = int(dilation * (kernel_size - 1) / 2)
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                              padding=padding, dilation=dilation, bias=bias)
        nn.init.xavier_uniform_(self.conv.weight, gain=nn.init.calculate_gain(w_init_gain))

    def forward(self, signal):
        return self.conv(signal)


class Encoder(nn.Module):
    def __init__(self, dim_neck, dim_emb, freq, dim_conv=64):
        super().__init__()
        self.dim_neck = dim_neck
        self.freq = freq
        convolutions = []
        for i in range(3):
            convolutions.append(nn.Sequential(
                ConvNorm(80 + dim_emb if i == 0 else dim_conv, dim_conv, kernel_size=5, stride=1,
                         padding=2, dilation=1, w_init_gain='relu'),
                nn.BatchNorm1d(dim_conv)))
        self.convolutions = nn.ModuleList(convolutions)
        self.lstm = nn.LSTM(dim_conv, dim_neck, 2, batch_first=True, bidirectional=True)

    def forward(self, x, c_org):
        x = x.squeeze(1).transpose(2, 1)
        c_org = c_org.unsqueeze(-1).expand(-1, -1, x.size(-1))
        x = torch.cat((x, c_org), dim=1)
        for conv in self.convolutions:
            x = F.relu(conv(x))
        x = x.transpose(1, 2)
        outputs, _ = self.lstm(x)
        out_forward = outputs[:, :, :self.dim_neck]
        out_backward = outputs[:, :, self.dim_neck:]
        codes = []
        for i in range(0, outputs.size(1), self.freq):
            codes.append(torch.cat((out_forward[:, i + self.freq - 1, :], out_backward[:, i, :]), dim=-1))
        return codes


class Decoder(nn.Module):
    def __init__(self, dim_neck, dim_emb, dim_pre, dim_lstm=96):
        super().__init__()
        self.lstm1 = nn.LSTM(dim_neck * 2 + dim_emb, dim_pre, 1, batch_first=True)
        convolutions = []
        for i in range(3):
            convolutions.append(nn.Sequential(
                ConvNorm(dim_pre, dim_pre, kernel_size=5, stride=1, padding=2, dilation=1, w_init_gain='relu'),
                nn.BatchNorm1d(dim_pre)))
        self.convolutions = nn.ModuleList(convolutions)
        self.lstm2 = nn.LSTM(dim_pre, dim_lstm, 2, batch_first=True)
        self.linear_projection = LinearNorm(dim_lstm, 80)

    def forward(self, x):
        x, _ = self.lstm1(x)
        x = x.transpose(1, 2)
        for conv in self.convolutions:
            x = F.relu(conv(x))
        x = x.transpose(1, 2)
        outputs, _ = self.lstm2(x)
        decoder_output = self.linear_projection(outputs)
        return decoder_output


class Postnet(nn.Module):
    """Postnet: five 1-d convolutions with kernel size 5"""

    def __init__(self, dim_post=64):
        super().__init__()
        self.convolutions = nn.ModuleList()
        self.convolutions.append(nn.Sequential(
            ConvNorm(80, dim_post, kernel_size=5, stride=1, padding=2, dilation=1, w_init_gain='tanh'),
            nn.BatchNorm1d(dim_post)))
        for i in range(1, 5 - 1):
            self.convolutions.append(nn.Sequential(
                ConvNorm(dim_post, dim_post, kernel_size=5, stride=1, padding=2, dilation=1, w_init_gain='tanh'),
                nn.BatchNorm1d(dim_post)))
        self.convolutions.append(
            ConvNorm(dim_post, 80, kernel_size=5, stride=1, padding=2, dilation=1, w_init_gain='linear'))

    def forward(self, x):
        for i in range(len(self.convolutions) - 1):
            x = torch.tanh(self.convolutions[i](x))
        x = self.convolutions[-1](x)
        return x


class Generator(nn.Module):
    """Generator network."""

    def __init__(self, dim_neck, dim_emb, dim_pre, freq):
        super().__init__()
        self.encoder = Encoder(dim_neck, dim_emb, freq)
        self.decoder = Decoder(dim_neck, dim_emb, dim_pre)
        self.postnet = Postnet()

    def forward(self, x, c_org, c_trg):
        codes = self.encoder(x, c_org)
        if c_trg is None:
            return torch.cat(codes, dim=-1)

        tmp = []
        for code in codes:
            tmp.append(code.unsqueeze(1).expand(-1, int(x.size(1) / len(codes)), -1))
        code_exp = torch.cat(tmp, dim=1)

        encoder_outputs = torch.cat((code_exp, c_trg.unsqueeze(1).expand(-1, x.size(1), -1)), dim=-1)
        mel_outputs = self.decoder(encoder_outputs)

        mel_outputs_postnet = self.postnet(mel_outputs.transpose(2, 1))
        mel_outputs_postnet = mel_outputs + mel_outputs_postnet.transpose(2, 1)

        mel_outputs = mel_outputs.unsqueeze(1)
        mel_outputs_postnet = mel_outputs_postnet.unsqueeze(1)

        return mel_outputs, mel_outputs_postnet, torch.cat(codes, dim=-1)


# --------------------------------------------------------------------------- solver_encoder.py
class Solver(object):

    def __init__(self, vcc_loader, val_meta, config):
        self.vcc_loader = vcc_loader
        self.val_meta = val_meta
        self.lambda_cd = config.lambda_cd
        self.dim_neck = config.dim_neck
        self.dim_emb = config.dim_emb
        self.dim_pre = config.dim_pre
        self.freq = config.freq
        self.batch_size = config.batch_size
        self.num_iters = config.num_iters
        self.len_crop = config.len_crop
        self.device = torch.device('cpu')
        self.log_step = config.log_step
        self.val_step = config.val_step
        self.build_model()

    def build_model(self):
        self.G = Generator(self.dim_neck, self.dim_emb, self.dim_pre, self.freq)
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), 0.001)
        self.G.to(self.device)

    def reset_grad(self):
        """Reset the gradient buffers."""
        self.g_optimizer.zero_grad()

    @torch.no_grad()
    def validate(self):
        """Self-reconstruction of each speaker's held-out utterance, as in conversion.ipynb."""
        self.G = self.G.eval()
        errs = []
        for spk in self.val_meta:
            emb = torch.from_numpy(spk[1][np.newaxis, :])
            x_org = spk[-1][:self.len_crop]
            uttr_org = torch.from_numpy(x_org[np.newaxis, :, :])
            _, x_identic_psnt, _ = self.G(uttr_org, emb, emb)
            uttr_trg = x_identic_psnt[0, 0, :, :].numpy()
            errs.append(float(np.mean((uttr_trg - x_org) ** 2)))
        return float(np.mean(errs))

    def train(self):
        data_loader = self.vcc_loader
        keys = ['G/loss_id', 'G/loss_id_psnt', 'G/loss_cd']
        print('Start training...')
        start_time = time.time()
        for i in range(self.num_iters):

            # Fetch data.
            try:
                x_real, emb_org = next(data_iter)
            except:
                data_iter = iter(data_loader)
                x_real, emb_org = next(data_iter)

            x_real = x_real.to(self.device)
            emb_org = emb_org.to(self.device)

            self.G = self.G.train()

            # Identity mapping loss
            x_identic, x_identic_psnt, code_real = self.G(x_real, emb_org, emb_org)
            g_loss_id = F.mse_loss(x_real, x_identic)
            g_loss_id_psnt = F.mse_loss(x_real, x_identic_psnt)

            # Code semantic loss.
            code_reconst = self.G(x_identic_psnt, emb_org, None)
            g_loss_cd = F.l1_loss(code_real, code_reconst)

            # Backward and optimize.
            g_loss = g_loss_id + g_loss_id_psnt + self.lambda_cd * g_loss_cd
            self.reset_grad()
            g_loss.backward()
            self.g_optimizer.step()

            loss = {}
            loss['G/loss_id'] = g_loss_id.item()
            loss['G/loss_id_psnt'] = g_loss_id_psnt.item()
            loss['G/loss_cd'] = g_loss_cd.item()

            if (i + 1) % self.log_step == 0:
                et = time.time() - start_time
                et = str(datetime.timedelta(seconds=et))[:-7]
                log = "Elapsed [{}], Iteration [{}/{}]".format(et, i + 1, self.num_iters)
                for tag in keys:
                    log += ", {}: {:.4f}".format(tag, loss[tag])
                print(log, flush=True)

            if (i + 1) % self.val_step == 0:
                print("Validation [{}]: held-out self-reconstruction mse {:.4f}".format(i + 1, self.validate()),
                      flush=True)


def main(config):
    meta = build_corpus(dim_emb=config.dim_emb)
    vcc_loader = get_loader(meta, config.batch_size, config.len_crop)
    solver = Solver(vcc_loader, meta, config)
    solver.train()


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--lambda_cd', type=float, default=1, help='weight for hidden code loss')
    parser.add_argument('--dim_neck', type=int, default=8)
    parser.add_argument('--dim_emb', type=int, default=64)
    parser.add_argument('--dim_pre', type=int, default=64)
    parser.add_argument('--freq', type=int, default=4)
    parser.add_argument('--batch_size', type=int, default=4, help='mini-batch size')
    parser.add_argument('--num_iters', type=int, default=200, help='number of total iterations')
    parser.add_argument('--len_crop', type=int, default=32, help='dataloader output sequence length')
    parser.add_argument('--log_step', type=int, default=10)
    parser.add_argument('--val_step', type=int, default=50)
    config = parser.parse_args()
    print(config)
    main(config)
