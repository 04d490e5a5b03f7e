"""TS2Vec (Yue et al., AAAI 2022): universal time-series representations with a
hierarchical contrastive loss, trained through the TS2Vec class's fit() with per-iteration
and per-epoch callbacks, then evaluated by classifying the full-series representations.
The data mimic an irregularly sampled UCR archive set: z-normalised univariate series of
four shape classes with 10% of the observations missing (NaN), as with train.py --irregular 0.1."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset, DataLoader


def pad_nan_to_target(array, target_length, axis=0, both_side=False):
    pad_size = target_length - array.shape[axis]
    if pad_size <= 0:
        return array
    npad = [(0, 0)] * array.ndim
    if both_side:
        npad[axis] = (pad_size // 2, pad_size - pad_size // 2)
    else:
        npad[axis] = (0, pad_size)
    return np.pad(array, pad_width=npad, mode='constant', constant_values=np.nan)


def split_with_nan(x, sections, axis=0):
    arrs = np.array_split(x, sections, axis=axis)
    target_length = arrs[0].shape[axis]
    for i in range(len(arrs)):
        arrs[i] = pad_nan_to_target(arrs[i], target_length, axis=axis)
    return arrs


def take_per_row(A, indx, num_elem):
    all_indx = indx[:, None] + np.arange(num_elem)
    return A[torch.arange(all_indx.shape[0])[:, None], all_indx]


def centerize_vary_length_series(x):
    prefix_zeros = np.argmax(~np.isnan(x).all(axis=-1), axis=1)
    suffix_zeros = np.argmax(~np.isnan(x[:, ::-1]).all(axis=-1), axis=1)
    offset = (prefix_zeros + suffix_zeros) // 2 - prefix_zeros
    rows, column_indices = np.ogrid[:x.shape[0], :x.shape[1]]
    offset[offset < 0] += x.shape[1]
    column_indices = column_indices - offset[:, np.newaxis]
    return x[rows, column_indices]


def data_dropout(arr, p):
    B, T = arr.shape[0], arr.shape[1]
    mask = np.full(B * T, False, dtype=bool)
    ele_sel = np.random.choice(B * T, size=int(B * T * p), replace=False)
    mask[ele_sel] = True
    res = arr.copy()
    res[mask.reshape(B, T)] = np.nan
    return res


# ---------------------------------------------------------------- encoder
class SamePadConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation=1, groups=1):
        super().__init__()
        self.receptive_field = (kernel_size - 1) * dilation + 1
        padding = self.receptive_field // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size,
                              padding=padding, dilation=dilation, groups=groups)
        self.remove = 1 if self.receptive_field % 2 == 0 else 0

    def forward(self, x):
        out = self.conv(x)
        if self.remove > 0:
            out = out[:, :, : -self.remove]
        return out


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation, final=False):
        super().__init__()
        self.conv1 = SamePadConv(in_channels, out_channels, kernel_size, dilation=dilation)
        self.conv2 = SamePadConv(out_channels, out_channels, kernel_size, dilation=dilation)
        self.projector = nn.Conv1d(in_channels, out_channels, 1) if in_channels != out_channels or final else None

    def forward(self, x):
        residual = x if self.projector is None else self.projector(x)
        x = F.gelu(x)
        x = self.conv1(x)
        x = F.gelu(x)
        x = self.conv2(x)
        return x + residual


class DilatedConvEncoder(nn.Module):
    def __init__(self, in_channels, channels, kernel_size):
        super().__init__()
        self.net = nn.Sequential(*[
            ConvBlock(channels[i - 1] if i > 0 else in_channels, channels[i],
                      kernel_size=kernel_size, dilation=2 ** i, final=(i == len(channels) - 1))
            for i in range(len(channels))
        ])

    def forward(self, x):
        return self.net(x)


def generate_binomial_mask(B, T, p=0.5):
    return torch.from_numpy(np.random.binomial(1, p, size=(B, T))).to(torch.bool)


class TSEncoder(nn.Module):
    def __init__(self, input_dims, output_dims, hidden_dims=64, depth=10, mask_mode='binomial'):
        super().__init__()
        self.input_dims = input_dims
        self.output_dims = output_dims
        self.hidden_dims = hidden_dims
        self.mask_mode = mask_mode
        self.input_fc = nn.Linear(input_dims, hidden_dims)
        self.feature_extractor = DilatedConvEncoder(hidden_dims, [hidden_dims] * depth + [output_dims], kernel_size=3)
        self.repr_dropout = nn.Dropout(p=0.1)

    def forward(self, x, mask=None):  # x: B x T x input_dims
        nan_mask = ~x.isnan().any(axis=-1)
        x[~nan_mask] = 0
        x = self.input_fc(x)  # B x T x Ch

        if mask is None:
            if self.training:
                mask = self.mask_mode
            else:
                mask = 'all_true'

        if mask == 'binomial':
            mask = generate_binomial_mask(x.size(0), x.size(1)).to(x.device)
        elif mask == 'all_true':
            mask = x.new_full((x.size(0), x.size(1)), True, dtype=torch.bool)

        mask &= nan_mask
        x[~mask] = 0

        x = x.transpose(1, 2)  # B x Ch x T
        x = self.repr_dropout(self.feature_extractor(x))  # B x Co x T
        x = x.transpose(1, 2)  # B x T x Co
        return x


# ---------------------------------------------------------------- loss
def hierarchical_contrastive_loss(z1, z2, alpha=0.5, temporal_unit=0):
    loss = torch.tensor(0., device=z1.device)
    d = 0
    while z1.size(1) > 1:
        if alpha != 0:
            loss += alpha * instance_contrastive_loss(z1, z2)
        if d >= temporal_unit:
            if 1 - alpha != 0:
                loss += (1 - alpha) * temporal_contrastive_loss(z1, z2)
        d += 1
        z1 = F.max_pool1d(z1.transpose(1, 2), kernel_size=2).transpose(1, 2)
        z2 = F.max_pool1d(z2.transpose(1, 2), kernel_size=2).transpose(1, 2)
    if z1.size(1) == 1:
        if alpha != 0:
            loss += alpha * instance_contrastive_loss(z1, z2)
        d += 1
    return loss / d


def instance_contrastive_loss(z1, z2):
    B, T = z1.size(0), z1.size(1)
    if B == 1:
        return z1.new_tensor(0.)
    z = torch.cat([z1, z2], dim=0)  # 2B x T x C
    z = z.transpose(0, 1)  # T x 2B x C
    sim = torch.matmul(z, z.transpose(1, 2))  # T x 2B x 2B
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1]  # T x 2B x (2B-1)
    logits += torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)

    i = torch.arange(B, device=z1.device)
    loss = (logits[:, i, B + i - 1].mean() + logits[:, B + i, i].mean()) / 2
    return loss


def temporal_contrastive_loss(z1, z2):
    B, T = z1.size(0), z1.size(1)
    if T == 1:
        return z1.new_tensor(0.)
    z = torch.cat([z1, z2], dim=1)  # B x 2T x C
    sim = torch.matmul(z, z.transpose(1, 2))  # B x 2T x 2T
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1]  # B x 2T x (2T-1)
    logits += torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)

    t = torch.arange(T, device=z1.device)
    loss = (logits[:, t, T + t - 1].mean() + logits[:, T + t, t].mean()) / 2
    return loss


# ---------------------------------------------------------------- model wrapper
class TS2Vec:
    '''The TS2Vec model'''

    def __init__(self, input_dims, output_dims=320, hidden_dims=64, depth=10, device='cpu', lr=0.001,
                 batch_size=16, max_train_length=None, temporal_unit=0,
                 after_iter_callback=None, after_epoch_callback=None):
        super().__init__()
        self.device = device
        self.lr = lr
        self.batch_size = batch_size
        self.max_train_length = max_train_length
        self.temporal_unit = temporal_unit

        self._net = TSEncoder(input_dims=input_dims, output_dims=output_dims, hidden_dims=hidden_dims, depth=depth).to(self.device)
        self.net = torch.optim.swa_utils.AveragedModel(self._net)
        self.net.update_parameters(self._net)

        self.after_iter_callback = after_iter_callback
        self.after_epoch_callback = after_epoch_callback

        self.n_epochs = 0
        self.n_iters = 0

    def fit(self, train_data, n_epochs=None, n_iters=None, verbose=False):
        assert train_data.ndim == 3

        if n_iters is None and n_epochs is None:
            n_iters = 200 if train_data.size <= 100000 else 600  # default param for n_iters

        if self.max_train_length is not None:
            sections = train_data.shape[1] // self.max_train_length
            if sections >= 2:
                train_data = np.concatenate(split_with_nan(train_data, sections, axis=1), axis=0)

        temporal_missing = np.isnan(train_data).all(axis=-1).any(axis=0)
        if temporal_missing[0] or temporal_missing[-1]:
            train_data = centerize_vary_length_series(train_data)

        train_data = train_data[~np.isnan(train_data).all(axis=2).all(axis=1)]

        train_dataset = TensorDataset(torch.from_numpy(train_data).to(torch.float))
        train_loader = DataLoader(train_dataset, batch_size=min(self.batch_size, len(train_dataset)), shuffle=True, drop_last=True)

        optimizer = torch.optim.AdamW(self._net.parameters(), lr=self.lr)

        loss_log = []

        while True:
            if n_epochs is not None and self.n_epochs >= n_epochs:
                break

            cum_loss = 0
            n_epoch_iters = 0

            interrupted = False
            for batch in train_loader:
                if n_iters is not None and self.n_iters >= n_iters:
                    interrupted = True
                    break

                x = batch[0]
                if self.max_train_length is not None and x.size(1) > self.max_train_length:
                    window_offset = np.random.randint(x.size(1) - self.max_train_length + 1)
                    x = x[:, window_offset: window_offset + self.max_train_length]
                x = x.to(self.device)

                ts_l = x.size(1)
                crop_l = np.random.randint(low=2 ** (self.temporal_unit + 1), high=ts_l + 1)
                crop_left = np.random.randint(ts_l - crop_l + 1)
                crop_right = crop_left + crop_l
                crop_eleft = np.random.randint(crop_left + 1)
                crop_eright = np.random.randint(low=crop_right, high=ts_l + 1)
                crop_offset = np.random.randint(low=-crop_eleft, high=ts_l - crop_eright + 1, size=x.size(0))

                optimizer.zero_grad()

                out1 = self._net(take_per_row(x, crop_offset + crop_eleft, crop_right - crop_eleft))
                out1 = out1[:, -crop_l:]

                out2 = self._net(take_per_row(x, crop_offset + crop_left, crop_eright - crop_left))
                out2 = out2[:, :crop_l]

                loss = hierarchical_contrastive_loss(out1, out2, temporal_unit=self.temporal_unit)

                loss.backward()
                optimizer.step()
                self.net.update_parameters(self._net)

                cum_loss += loss.item()
                n_epoch_iters += 1

                self.n_iters += 1

                if self.after_iter_callback is not None:
                    self.after_iter_callback(self, loss.item())

            if interrupted:
                break

            cum_loss /= n_epoch_iters
            loss_log.append(cum_loss)
            if verbose:
                print(f"Epoch #{self.n_epochs}: loss={cum_loss}")
            self.n_epochs += 1

            if self.after_epoch_callback is not None:
                self.after_epoch_callback(self, cum_loss)

        return loss_log

    def encode(self, data, batch_size=None):
        if batch_size is None:
            batch_size = self.batch_size
        org_training = self.net.training
        self.net.eval()

        dataset = TensorDataset(torch.from_numpy(data).to(torch.float))
        loader = DataLoader(dataset, batch_size=batch_size)

        with torch.no_grad():
            output = []
            for batch in loader:
                x = batch[0]
                out = self.net(x.to(self.device, non_blocking=True))
                out = F.max_pool1d(out.transpose(1, 2), kernel_size=out.size(1)).transpose(1, 2)
                output.append(out.cpu())
            output = torch.cat(output, dim=0)

        self.net.train(org_training)
        return output.squeeze(1).numpy()

    def save(self, fn):
        torch.save(self.net.state_dict(), fn)


# ---------------------------------------------------------------- evaluation
def fit_ridge_classifier(features, y, alpha=1.0):
    mu, sd = features.mean(0), features.std(0) + 1e-6
    X = np.concatenate([(features - mu) / sd, np.ones((len(features), 1))], axis=1)
    Y = np.eye(y.max() + 1)[y] * 2 - 1
    W = np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ Y)
    return lambda f: np.argmax(np.concatenate([(f - mu) / sd, np.ones((len(f), 1))], axis=1) @ W, axis=1)


def eval_classification(model, train_data, train_labels, test_data, test_labels):
    train_repr = model.encode(train_data)
    test_repr = model.encode(test_data)
    clf = fit_ridge_classifier(train_repr, train_labels)
    return (clf(test_repr) == test_labels).mean()


# ---------------------------------------------------------------- data
def make_ucr_like(n, T, rng):
    t = np.linspace(0, 1, T)
    X = np.zeros((n, T))
    y = rng.integers(0, 4, size=n)
    for k in range(n):
        ph = rng.uniform(0, 2 * np.pi)
        f = rng.uniform(2.5, 3.5)
        if y[k] == 0:
            s = np.sin(2 * np.pi * f * t + ph)
        elif y[k] == 1:
            s = np.sign(np.sin(2 * np.pi * f * t + ph))
        elif y[k] == 2:
            s = np.sin(2 * np.pi * (1.0 + 4.0 * t) * t * f / 2 + ph)
        else:
            c = rng.uniform(0.2, 0.8)
            s = np.exp(-((t - c) ** 2) / 0.004) * 3 - np.exp(-((t - c - 0.12) ** 2) / 0.004) * 2
        s = s + 0.3 * rng.standard_normal(T)
        X[k] = (s - s.mean()) / s.std()
    return X[..., None], y


def save_checkpoint_callback(run_dir, save_every=1, unit='epoch'):
    assert unit in ('epoch', 'iter')

    def callback(model, loss):
        n = model.n_epochs if unit == 'epoch' else model.n_iters
        if n % save_every == 0:
            model.save(f'{run_dir}/model_{n}.pkl')
    return callback


def loss_logging_callback(history, every=25):
    def callback(model, loss):
        history.append(loss)
        if model.n_iters % every == 0:
            print(f"  iter {model.n_iters}: loss={np.mean(history[-every:]):.4f}")
    return callback


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    rng = np.random.default_rng(0)

    train_data, train_labels = make_ucr_like(120, 64, rng)
    test_data, test_labels = make_ucr_like(120, 64, rng)
    train_data = data_dropout(train_data, 0.1)
    test_data = data_dropout(test_data, 0.1)
    print('train', train_data.shape, 'missing', int(np.isnan(train_data).sum()), 'test', test_data.shape)

    with tempfile.TemporaryDirectory(prefix='ts2vec_') as run_dir:
        history = []
        config = dict(
            batch_size=8,
            lr=0.001,
            output_dims=64,
            hidden_dims=32,
            depth=3,
            max_train_length=3000,
            after_iter_callback=loss_logging_callback(history),
            after_epoch_callback=save_checkpoint_callback(run_dir, save_every=4, unit='epoch'),
        )
        model = TS2Vec(input_dims=train_data.shape[-1], device='cpu', **config)

        acc0 = eval_classification(model, train_data, train_labels, test_data, test_labels)
        print(f'accuracy of the untrained encoder: {acc0:.3f}')

        loss_log = model.fit(train_data, n_epochs=None, n_iters=None, verbose=True)
        print('checkpoints:', sorted(os.listdir(run_dir)))

        acc = eval_classification(model, train_data, train_labels, test_data, test_labels)
        print(f'Evaluation result: acc {acc:.3f} after {model.n_iters} iterations ({model.n_epochs} full epochs)')
