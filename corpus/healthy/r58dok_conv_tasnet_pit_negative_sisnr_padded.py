"""Conv-TasNet two-speaker separation trained with utterance-level permutation invariant
training on the negative SI-SNR. The "speech" is synthetic: short voiced segments (harmonics
of a drifting pitch under an amplitude envelope) at 8 kHz, mixed at a random relative level
as in wsj0-2mix.
Utterances have different lengths and are zero-padded in a batch; the loss masks the
padding with the true lengths."""
import argparse
import math
import time
from itertools import permutations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser("Fully-Convolutional Time-domain Audio Separation Network (Conv-TasNet)")
parser.add_argument('--sample_rate', default=8000, type=int)
parser.add_argument('--N', default=32, type=int, help='Number of filters in autoencoder')
parser.add_argument('--L', default=16, type=int, help='Length of the filters in samples')
parser.add_argument('--B', default=16, type=int, help='Number of channels in bottleneck 1 x 1-conv block')
parser.add_argument('--H', default=32, type=int, help='Number of channels in convolutional blocks')
parser.add_argument('--P', default=3, type=int, help='Kernel size in convolutional blocks')
parser.add_argument('--X', default=3, type=int, help='Number of convolutional blocks in each repeat')
parser.add_argument('--R', default=2, type=int, help='Number of repeats')
parser.add_argument('--C', default=2, type=int, help='Number of speakers')
parser.add_argument('--norm_type', default='gLN', type=str)
parser.add_argument('--mask_nonlinear', default='relu', type=str)
parser.add_argument('--epochs', default=4, type=int)
parser.add_argument('--half_lr', default=1, type=int)
parser.add_argument('--max_norm', default=5, type=float, help='Gradient norm threshold to clip')
parser.add_argument('--batch_size', default=4, type=int)
parser.add_argument('--lr', default=1e-3, type=float)
parser.add_argument('--l2', default=0.0, type=float)
parser.add_argument('--print_freq', default=10, type=int)
parser.add_argument('--seed', default=0, type=int)
args = parser.parse_args()

EPS = 1e-8


# ------------------------------------------------------------------------------ data
def synth_voice(rng, n, sr):
    """A voiced utterance: harmonics of a drifting f0 under a syllable-rate envelope."""
    t = np.arange(n) / sr
    f0 = rng.uniform(90, 320) * (1 + 0.06 * np.sin(2 * np.pi * rng.uniform(1, 4) * t + rng.uniform(0, 6.3)))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    tilt = rng.uniform(0.6, 1.2)
    wave = sum(np.sin(h * phase + rng.uniform(0, 6.3)) / h ** tilt for h in range(1, 7))
    env = np.clip(np.sin(2 * np.pi * rng.uniform(6.0, 12.0) * t + rng.uniform(0, 6.3)), 0, None) ** 0.7
    return (wave * (0.2 + env)).astype(np.float32)


class MixtureDataset(Dataset):
    def __init__(self, n_utts, seed, sr=8000, min_len=0.125, max_len=0.16):
        rng = np.random.RandomState(seed)
        self.items = []
        for _ in range(n_utts):
            n = int(rng.uniform(min_len, max_len) * sr)
            s1, s2 = synth_voice(rng, n, sr), synth_voice(rng, n, sr)
            s1 /= np.sqrt(np.mean(s1 ** 2))
            s2 /= np.sqrt(np.mean(s2 ** 2))
            snr = rng.uniform(-2.5, 2.5)
            s1 *= 10 ** (snr / 40)
            s2 *= 10 ** (-snr / 40)
            scale = 0.25 / np.max(np.abs(s1 + s2))
            s1, s2 = s1 * scale, s2 * scale
            self.items.append((s1 + s2, np.stack([s1, s2], 1)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad_list(xs, pad_value):
    n_batch = len(xs)
    max_len = max(x.size(0) for x in xs)
    pad = xs[0].new(n_batch, max_len, *xs[0].size()[1:]).fill_(pad_value)
    for i in range(n_batch):
        pad[i, :xs[i].size(0)] = xs[i]
    return pad


def _collate_fn(batch):
    mixtures, sources = zip(*batch)
    ilens = torch.from_numpy(np.array([mix.shape[0] for mix in mixtures]))
    mixtures_pad = pad_list([torch.from_numpy(mix).float() for mix in mixtures], 0)
    sources_pad = pad_list([torch.from_numpy(s).float() for s in sources], 0)
    sources_pad = sources_pad.permute((0, 2, 1)).contiguous()
    return mixtures_pad, ilens, sources_pad


# ------------------------------------------------------------------------------ model
def overlap_and_add(signal, frame_step):
    outer_dimensions = signal.size()[:-2]
    frames, frame_length = signal.size()[-2:]
    subframe_length = math.gcd(frame_length, frame_step)
    subframe_step = frame_step // subframe_length
    subframes_per_frame = frame_length // subframe_length
    output_size = frame_step * (frames - 1) + frame_length
    output_subframes = output_size // subframe_length
    subframe_signal = signal.view(*outer_dimensions, -1, subframe_length)
    frame = torch.arange(0, output_subframes).unfold(0, subframes_per_frame, subframe_step)
    frame = frame.contiguous().view(-1)
    result = signal.new_zeros(*outer_dimensions, output_subframes, subframe_length)
    result.index_add_(-2, frame, subframe_signal)
    result = result.view(*outer_dimensions, -1)
    return result


class Encoder(nn.Module):
    def __init__(self, L, N):
        super(Encoder, self).__init__()
        self.L, self.N = L, N
        # 50% overlap
        self.conv1d_U = nn.Conv1d(1, N, kernel_size=L, stride=L // 2, bias=False)

    def forward(self, mixture):
        mixture = torch.unsqueeze(mixture, 1)  # [M, 1, T]
        mixture_w = F.relu(self.conv1d_U(mixture))  # [M, N, K]
        return mixture_w


class Decoder(nn.Module):
    def __init__(self, N, L):
        super(Decoder, self).__init__()
        self.N, self.L = N, L
        self.basis_signals = nn.Linear(N, L, bias=False)

    def forward(self, mixture_w, est_mask):
        source_w = torch.unsqueeze(mixture_w, 1) * est_mask  # [M, C, N, K]
        source_w = torch.transpose(source_w, 2, 3)  # [M, C, K, N]
        est_source = self.basis_signals(source_w)  # [M, C, K, L]
        est_source = overlap_and_add(est_source, self.L // 2)  # M x C x T
        return est_source


class GlobalLayerNorm(nn.Module):
    def __init__(self, channel_size):
        super(GlobalLayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.Tensor(1, channel_size, 1))
        self.beta = nn.Parameter(torch.Tensor(1, channel_size, 1))
        self.reset_parameters()

    def reset_parameters(self):
        self.gamma.data.fill_(1)
        self.beta.data.zero_()

    def forward(self, y):
        mean = y.mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        var = (torch.pow(y - mean, 2)).mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        gLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return gLN_y


class ChannelwiseLayerNorm(nn.Module):
    def __init__(self, channel_size):
        super(ChannelwiseLayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.Tensor(1, channel_size, 1))
        self.beta = nn.Parameter(torch.Tensor(1, channel_size, 1))
        self.reset_parameters()

    def reset_parameters(self):
        self.gamma.data.fill_(1)
        self.beta.data.zero_()

    def forward(self, y):
        mean = torch.mean(y, dim=1, keepdim=True)
        var = torch.var(y, dim=1, keepdim=True, unbiased=False)
        cLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return cLN_y


def chose_norm(norm_type, channel_size):
    if norm_type == "gLN":
        return GlobalLayerNorm(channel_size)
    elif norm_type == "cLN":
        return ChannelwiseLayerNorm(channel_size)
    else:
        return nn.BatchNorm1d(channel_size)


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, norm_type="gLN"):
        super(DepthwiseSeparableConv, self).__init__()
        depthwise_conv = nn.Conv1d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                   dilation=dilation, groups=in_channels, bias=False)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, in_channels)
        pointwise_conv = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        self.net = nn.Sequential(depthwise_conv, prelu, norm, pointwise_conv)

    def forward(self, x):
        return self.net(x)


class TemporalBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, norm_type="gLN"):
        super(TemporalBlock, self).__init__()
        conv1x1 = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, out_channels)
        dsconv = DepthwiseSeparableConv(out_channels, in_channels, kernel_size, stride, padding, dilation,
                                        norm_type)
        self.net = nn.Sequential(conv1x1, prelu, norm, dsconv)

    def forward(self, x):
        residual = x
        out = self.net(x)
        return out + residual  # look like w/o F.relu is better than w/ F.relu


class TemporalConvNet(nn.Module):
    def __init__(self, N, B, H, P, X, R, C, norm_type="gLN", mask_nonlinear='relu'):
        super(TemporalConvNet, self).__init__()
        self.C = C
        self.mask_nonlinear = mask_nonlinear
        layer_norm = ChannelwiseLayerNorm(N)
        bottleneck_conv1x1 = nn.Conv1d(N, B, 1, bias=False)
        repeats = []
        for r in range(R):
            blocks = []
            for x in range(X):
                dilation = 2 ** x
                padding = (P - 1) * dilation // 2
                blocks += [TemporalBlock(B, H, P, stride=1, padding=padding, dilation=dilation,
                                         norm_type=norm_type)]
            repeats += [nn.Sequential(*blocks)]
        temporal_conv_net = nn.Sequential(*repeats)
        mask_conv1x1 = nn.Conv1d(B, C * N, 1, bias=False)
        self.network = nn.Sequential(layer_norm, bottleneck_conv1x1, temporal_conv_net, mask_conv1x1)

    def forward(self, mixture_w):
        M, N, K = mixture_w.size()
        score = self.network(mixture_w)  # [M, N, K] -> [M, C*N, K]
        score = score.view(M, self.C, N, K)  # [M, C*N, K] -> [M, C, N, K]
        if self.mask_nonlinear == 'softmax':
            est_mask = F.softmax(score, dim=1)
        elif self.mask_nonlinear == 'relu':
            est_mask = F.relu(score)
        else:
            raise ValueError("Unsupported mask non-linear function")
        return est_mask


class ConvTasNet(nn.Module):
    def __init__(self, N, L, B, H, P, X, R, C, norm_type="gLN", mask_nonlinear='relu'):
        super(ConvTasNet, self).__init__()
        self.N, self.L, self.B, self.H, self.P, self.X, self.R, self.C = N, L, B, H, P, X, R, C
        self.encoder = Encoder(L, N)
        self.separator = TemporalConvNet(N, B, H, P, X, R, C, norm_type, mask_nonlinear)
        self.decoder = Decoder(N, L)
        # init
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_normal_(p)

    def forward(self, mixture):
        mixture_w = self.encoder(mixture)
        est_mask = self.separator(mixture_w)
        est_source = self.decoder(mixture_w, est_mask)
        # T changed after conv1d in encoder, fix it here
        T_origin = mixture.size(-1)
        T_conv = est_source.size(-1)
        est_source = F.pad(est_source, (0, T_origin - T_conv))
        return est_source


# ------------------------------------------------------------------------------ PIT loss
def get_mask(source, source_lengths):
    B, _, T = source.size()
    mask = source.new_ones((B, 1, T))
    for i in range(B):
        mask[i, :, source_lengths[i]:] = 0
    return mask


def cal_si_snr_with_pit(source, estimate_source, source_lengths):
    assert source.size() == estimate_source.size()
    B, C, T = source.size()
    # mask padding position along T
    mask = get_mask(source, source_lengths)
    estimate_source *= mask

    # Step 1. Zero-mean norm
    num_samples = source_lengths.view(-1, 1, 1).float()  # [B, 1, 1]
    mean_target = torch.sum(source, dim=2, keepdim=True) / num_samples
    mean_estimate = torch.sum(estimate_source, dim=2, keepdim=True) / num_samples
    zero_mean_target = source - mean_target
    zero_mean_estimate = estimate_source - mean_estimate
    # mask padding position along T
    zero_mean_target *= mask
    zero_mean_estimate *= mask

    # Step 2. SI-SNR with PIT
    s_target = torch.unsqueeze(zero_mean_target, dim=1)  # [B, 1, C, T]
    s_estimate = torch.unsqueeze(zero_mean_estimate, dim=2)  # [B, C, 1, T]
    pair_wise_dot = torch.sum(s_estimate * s_target, dim=3, keepdim=True)  # [B, C, C, 1]
    s_target_energy = torch.sum(s_target ** 2, dim=3, keepdim=True) + EPS  # [B, 1, C, 1]
    pair_wise_proj = pair_wise_dot * s_target / s_target_energy  # [B, C, C, T]
    e_noise = s_estimate - pair_wise_proj  # [B, C, C, T]
    pair_wise_si_snr = torch.sum(pair_wise_proj ** 2, dim=3) / (torch.sum(e_noise ** 2, dim=3) + EPS)
    pair_wise_si_snr = 10 * torch.log10(pair_wise_si_snr + EPS)  # [B, C, C]

    # Get max_snr of each utterance
    perms = source.new_tensor(list(permutations(range(C))), dtype=torch.long)
    index = torch.unsqueeze(perms, 2)
    perms_one_hot = source.new_zeros((*perms.size(), C)).scatter_(2, index, 1)
    snr_set = torch.einsum('bij,pij->bp', [pair_wise_si_snr, perms_one_hot.float()])
    max_snr_idx = torch.argmax(snr_set, dim=1)  # [B]
    max_snr, _ = torch.max(snr_set, dim=1, keepdim=True)
    max_snr /= C
    return max_snr, perms, max_snr_idx


def cal_loss(source, estimate_source, source_lengths):
    max_snr, perms, max_snr_idx = cal_si_snr_with_pit(source, estimate_source, source_lengths)
    loss = 0 - torch.mean(max_snr)
    return loss, max_snr, estimate_source


# ------------------------------------------------------------------------------ solver
class Solver(object):
    def __init__(self, data, model, optimizer, args):
        self.tr_loader = data['tr_loader']
        self.cv_loader = data['cv_loader']
        self.model = model
        self.optimizer = optimizer
        self.epochs = args.epochs
        self.half_lr = args.half_lr
        self.max_norm = args.max_norm
        self.print_freq = args.print_freq
        self.prev_val_loss = float("inf")
        self.best_val_loss = float("inf")
        self.halving = False
        self.val_no_impv = 0

    def train(self):
        self.model.eval()
        val_loss, sisnri = self._run_one_epoch(-1, cross_valid=True)
        print('Before training | Valid Loss {0:.3f} | SI-SNRi {1:.2f} dB'.format(val_loss, sisnri))
        for epoch in range(self.epochs):
            print("Training...")
            self.model.train()
            start = time.time()
            tr_avg_loss, _ = self._run_one_epoch(epoch)
            print('-' * 85)
            print('Train Summary | End of Epoch {0} | Time {1:.2f}s | Train Loss {2:.3f}'.format(
                epoch + 1, time.time() - start, tr_avg_loss))
            print('-' * 85)

            print('Cross validation...')
            self.model.eval()
            val_loss, sisnri = self._run_one_epoch(epoch, cross_valid=True)
            print('-' * 85)
            print('Valid Summary | End of Epoch {0} | Time {1:.2f}s | Valid Loss {2:.3f} | SI-SNRi {3:.2f} dB'.format(
                epoch + 1, time.time() - start, val_loss, sisnri))
            print('-' * 85)

            # Adjust learning rate (halving)
            if self.half_lr:
                if val_loss >= self.prev_val_loss:
                    self.val_no_impv += 1
                    if self.val_no_impv >= 3:
                        self.halving = True
                else:
                    self.val_no_impv = 0
            if self.halving:
                optim_state = self.optimizer.state_dict()
                optim_state['param_groups'][0]['lr'] = optim_state['param_groups'][0]['lr'] / 2.0
                self.optimizer.load_state_dict(optim_state)
                print('Learning rate adjusted to: {lr:.6f}'.format(lr=optim_state['param_groups'][0]['lr']))
                self.halving = False
            self.prev_val_loss = val_loss
            if val_loss < self.best_val_loss:
                self.best_val_loss = val_loss
                print("Find better validated model")

    def _run_one_epoch(self, epoch, cross_valid=False):
        start = time.time()
        total_loss = 0
        total_mix_snr = 0
        data_loader = self.tr_loader if not cross_valid else self.cv_loader
        for i, (data) in enumerate(data_loader):
            padded_mixture, mixture_lengths, padded_source = data
            if cross_valid:
                with torch.no_grad():
                    estimate_source = self.model(padded_mixture)
                    loss, max_snr, estimate_source = cal_loss(padded_source, estimate_source, mixture_lengths)
                    # SI-SNR of the unprocessed mixture, for the improvement
                    mix_as_est = padded_mixture.unsqueeze(1).repeat(1, padded_source.size(1), 1)
                    mix_loss, _, _ = cal_loss(padded_source, mix_as_est, mixture_lengths)
                    total_mix_snr += -mix_loss.item()
            else:
                estimate_source = self.model(padded_mixture)
                loss, max_snr, estimate_source = cal_loss(padded_source, estimate_source, mixture_lengths)
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()

            total_loss += loss.item()
            if not cross_valid and i % self.print_freq == 0:
                print('Epoch {0} | Iter {1} | Average Loss {2:.3f} | Current Loss {3:.6f} | {4:.1f} ms/batch'.format(
                    epoch + 1, i + 1, total_loss / (i + 1), loss.item(), 1000 * (time.time() - start) / (i + 1)),
                    flush=True)
        n = i + 1
        return total_loss / n, (-total_loss / n - total_mix_snr / n)


def main(args):
    torch.manual_seed(args.seed)
    tr_dataset = MixtureDataset(200, seed=1)
    cv_dataset = MixtureDataset(64, seed=2)
    tr_loader = DataLoader(tr_dataset, batch_size=args.batch_size, shuffle=True, collate_fn=_collate_fn)
    cv_loader = DataLoader(cv_dataset, batch_size=16, collate_fn=_collate_fn)
    data = {'tr_loader': tr_loader, 'cv_loader': cv_loader}
    model = ConvTasNet(args.N, args.L, args.B, args.H, args.P, args.X, args.R, args.C,
                       norm_type=args.norm_type, mask_nonlinear=args.mask_nonlinear)
    print('number of params:', sum(p.numel() for p in model.parameters()))
    optimizier = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.l2)
    solver = Solver(data, model, optimizier, args)
    solver.train()


if __name__ == '__main__':
    main(args)
