"""Bearing fault diagnosis with an autoencoder (Ae1d-style, after the DL-based intelligent
diagnosis benchmark): first train encoder + decoder to reconstruct 1024-point vibration slices,
then train encoder + classifier on the 10 bearing conditions.

Synthetic CWRU-like signals: shaft harmonics, a resonance excited by fault impacts at a
condition-specific period, and noise.
"""
import argparse
import logging
import time

import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import Dataset, DataLoader

logging.basicConfig(level=logging.INFO, format="%(message)s")
torch.manual_seed(0)
np.random.seed(0)

SIGNAL_SIZE = 1024
NUM_CLASSES = 10


def make_signal(label, rng, fs=12000.0):
    t = np.arange(SIGNAL_SIZE) / fs
    shaft = 29.95
    x = 0.6 * np.sin(2 * np.pi * shaft * t + rng.uniform(0, 2 * np.pi))
    x += 0.3 * np.sin(2 * np.pi * 2 * shaft * t + rng.uniform(0, 2 * np.pi))
    if label > 0:
        fault_freq = [0, 107.4, 162.2, 141.2, 107.4, 162.2, 141.2, 107.4, 162.2, 141.2][label]
        resonance = [0, 2800, 2800, 2800, 3600, 3600, 3600, 1900, 1900, 1900][label]
        amp = 1.0 + 0.5 * ((label - 1) // 3)
        period = int(fs / fault_freq)
        start = rng.randint(period)
        for k in range(start, SIGNAL_SIZE, period):
            n = np.arange(SIGNAL_SIZE - k)
            x[k:] += amp * np.exp(-n / 30.0) * np.sin(2 * np.pi * resonance * n / fs)
    x += 0.3 * rng.randn(SIGNAL_SIZE)
    return x


class CWRUSlice(Dataset):
    inputchannel = 1
    num_classes = NUM_CLASSES

    def __init__(self, n_per_class, seed):
        rng = np.random.RandomState(seed)
        data, labels = [], []
        for label in range(NUM_CLASSES):
            for _ in range(n_per_class):
                data.append(make_signal(label, rng))
                labels.append(label)
        data = np.stack(data).astype(np.float32)
        data = (data - data.mean(axis=1, keepdims=True)) / data.std(axis=1, keepdims=True)
        self.data = torch.from_numpy(data).unsqueeze(1)
        self.labels = torch.tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.data[idx], self.labels[idx]


def fc_block(i, o):
    return nn.Sequential(nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU(inplace=True))


class encoder(nn.Module):
    def __init__(self, in_channel=1, out_size=64):
        super(encoder, self).__init__()
        self.fc1 = fc_block(SIGNAL_SIZE, 512)
        self.fc2 = fc_block(512, 256)
        self.fc3 = fc_block(256, 128)
        self.fc4 = nn.Linear(128, out_size)

    def forward(self, x):
        out = x.view(x.size(0), -1)
        out = self.fc1(out)
        out = self.fc2(out)
        out = self.fc3(out)
        return self.fc4(out)


class decoder(nn.Module):
    def __init__(self, in_size=64):
        super(decoder, self).__init__()
        self.fc1 = fc_block(in_size, 128)
        self.fc2 = fc_block(128, 256)
        self.fc3 = fc_block(256, 512)
        self.fc4 = nn.Linear(512, SIGNAL_SIZE)

    def forward(self, z):
        out = self.fc1(z)
        out = self.fc2(out)
        out = self.fc3(out)
        return self.fc4(out)


class classifier(nn.Module):
    def __init__(self, in_size=64, out_channel=NUM_CLASSES):
        super(classifier, self).__init__()
        self.fc = nn.Sequential(nn.ReLU(), nn.Linear(in_size, out_channel))

    def forward(self, z):
        return self.fc(z)


def main(args):
    datasets = {'train': CWRUSlice(60, seed=1), 'val': CWRUSlice(20, seed=2)}
    dataloaders = {x: DataLoader(datasets[x], batch_size=args.batch_size, shuffle=(x == 'train'))
                   for x in ['train', 'val']}

    enc, dec, cls = encoder(), decoder(), classifier()
    optimizer = optim.Adam([{'params': enc.parameters()}, {'params': dec.parameters()}], lr=args.lr)
    optimizer1 = optim.Adam([{'params': enc.parameters()}, {'params': cls.parameters()}], lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    criterion1 = nn.MSELoss()

    print("Training Autoencoder with minimum loss")
    step = 0
    for epoch in range(args.middle_epoch):
        for phase in ['train', 'val']:
            enc.train(phase == 'train')
            dec.train(phase == 'train')
            epoch_loss = 0.0
            for inputs, labels in dataloaders[phase]:
                with torch.set_grad_enabled(phase == 'train'):
                    z = enc(inputs)
                    recx = dec(z)
                    loss = criterion1(recx, inputs)
                    epoch_loss += loss.item() * inputs.size(0)
                    if phase == 'train':
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        step += 1
            epoch_loss /= len(datasets[phase])
            logging.info('Epoch: {} {}-Loss: {:.4f} (step {})'.format(epoch, phase, epoch_loss, step))

    for epoch1 in range(args.max_epoch):
        for phase in ['train', 'val']:
            enc.train(phase == 'train')
            cls.train(phase == 'train')
            epoch_loss, epoch_acc = 0.0, 0
            for inputs, labels in dataloaders[phase]:
                with torch.set_grad_enabled(phase == 'train'):
                    logits = cls(enc(inputs))
                    loss = criterion(logits, labels)
                    epoch_loss += loss.item() * inputs.size(0)
                    epoch_acc += (logits.argmax(dim=1) == labels).sum().item()
                    if phase == 'train':
                        optimizer1.zero_grad()
                        loss.backward()
                        optimizer1.step()
                        step += 1
            n = len(datasets[phase])
            logging.info('Epoch: {} {}-Loss: {:.4f} {}-Acc: {:.4f} (step {})'.format(
                epoch1, phase, epoch_loss / n, phase, epoch_acc / n, step))


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--batch_size', type=int, default=64)
    parser.add_argument('--lr', type=float, default=1e-3)
    parser.add_argument('--middle_epoch', type=int, default=8)
    parser.add_argument('--max_epoch', type=int, default=4)
    start = time.time()
    main(parser.parse_args())
    print('done in {:.1f} s'.format(time.time() - start))
