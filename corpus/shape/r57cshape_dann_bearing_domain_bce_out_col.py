"""Unsupervised domain adaptation for bearing fault diagnosis (UDTL-style DANN):
a 1D CNN is trained on labelled vibration signals of the source working condition
(load 0) and, after `middle_epoch`, aligned to the unlabelled target condition
(load 3) with a domain discriminator behind a gradient reversal layer.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

FS = 12000
SIG_LEN = 512
FAULT_ORDERS = {1: 5.4152, 2: 3.5848, 3: 4.7135}   # inner race, outer race, ball (x shaft freq)


def parse_args():
    parser = argparse.ArgumentParser(description='DANN for CWRU-like transfer task 0 -> 3')
    parser.add_argument('--batch_size', type=int, default=32)
    parser.add_argument('--lr', type=float, default=1e-3)
    parser.add_argument('--max_epoch', type=int, default=6)
    parser.add_argument('--middle_epoch', type=int, default=3)
    parser.add_argument('--bottleneck_num', type=int, default=128)
    parser.add_argument('--hidden_size', type=int, default=256)
    parser.add_argument('--trade_off_adversarial', type=str, default='Step')
    return parser.parse_args()


def make_signals(n_per_class, rpm, noise, gain, rng):
    t = np.arange(SIG_LEN) / FS
    fr = rpm / 60.0
    xs, ys = [], []
    for label in range(4):
        for _ in range(n_per_class):
            phase = rng.uniform(0, 2 * np.pi)
            x = 0.3 * np.sin(2 * np.pi * fr * t + phase)
            if label > 0:
                period = 1.0 / (FAULT_ORDERS[label] * fr)
                t0 = rng.uniform(0, period)
                for k in range(int(SIG_LEN / FS / period) + 2):
                    tau = t - (t0 + k * period)
                    ring = np.where(tau >= 0, np.exp(-900 * np.clip(tau, 0, None)), 0.0)
                    amp = 1.0 + (0.6 * np.sin(2 * np.pi * fr * k * period) if label == 1 else 0.0)
                    x = x + amp * ring * np.sin(2 * np.pi * (2600 + 400 * label) * tau)
            x = gain * x + noise * rng.standard_normal(SIG_LEN)
            xs.append(x)
            ys.append(label)
    xs = np.stack(xs).astype(np.float32)
    xs = (xs - xs.mean(axis=1, keepdims=True)) / (xs.std(axis=1, keepdims=True) + 1e-8)
    return xs, np.array(ys)


class CWRUSignals(Dataset):
    def __init__(self, xs, ys):
        self.xs = torch.from_numpy(xs).unsqueeze(1)
        self.ys = torch.from_numpy(ys).long()

    def __len__(self):
        return len(self.ys)

    def __getitem__(self, i):
        return self.xs[i], self.ys[i]


class CNNFeatures(nn.Module):
    def __init__(self, in_channel=1):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv1d(in_channel, 16, kernel_size=15, stride=2), nn.BatchNorm1d(16),
                                    nn.ReLU(inplace=True), nn.MaxPool1d(2))
        self.layer2 = nn.Sequential(nn.Conv1d(16, 32, kernel_size=3), nn.BatchNorm1d(32), nn.ReLU(inplace=True),
                                    nn.MaxPool1d(kernel_size=2, stride=2))
        self.layer3 = nn.Sequential(nn.Conv1d(32, 64, kernel_size=3), nn.BatchNorm1d(64), nn.ReLU(inplace=True))
        self.layer4 = nn.Sequential(nn.Conv1d(64, 64, kernel_size=3), nn.BatchNorm1d(64), nn.ReLU(inplace=True),
                                    nn.AdaptiveMaxPool1d(4))
        self.layer5 = nn.Sequential(nn.Linear(64 * 4, 256), nn.ReLU(inplace=True), nn.Dropout())

    def forward(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.layer5(x.view(x.size(0), -1))

    def output_num(self):
        return 256


def calc_coeff(iter_num, high=1.0, low=0.0, alpha=10.0, max_iter=10000.0):
    return float(2.0 * (high - low) / (1.0 + np.exp(-alpha * iter_num / max_iter)) - (high - low) + low)


def grl_hook(coeff):
    def fun1(grad):
        return -coeff * grad.clone()
    return fun1


class AdversarialNet(nn.Module):
    def __init__(self, in_feature, hidden_size, max_iter=10000.0, trade_off_adversarial='Step'):
        super().__init__()
        self.ad_layer1 = nn.Sequential(nn.Linear(in_feature, hidden_size), nn.ReLU(inplace=True), nn.Dropout())
        self.ad_layer2 = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(inplace=True), nn.Dropout())
        self.ad_layer3 = nn.Linear(hidden_size, 1)
        self.sigmoid = nn.Sigmoid()
        self.iter_num = 0
        self.max_iter = max_iter
        self.trade_off_adversarial = trade_off_adversarial

    def forward(self, x):
        if self.training:
            self.iter_num += 1
        coeff = calc_coeff(self.iter_num, max_iter=self.max_iter) if self.trade_off_adversarial == 'Step' else 1.0
        x = x * 1.0
        x.register_hook(grl_hook(coeff))
        x = self.ad_layer2(self.ad_layer1(x))
        return self.sigmoid(self.ad_layer3(x))


args = parse_args()
rng = np.random.RandomState(0)
src_x, src_y = make_signals(200, rpm=1797, noise=0.15, gain=1.0, rng=rng)
tgt_x, tgt_y = make_signals(200, rpm=1730, noise=0.3, gain=0.8, rng=rng)
perm = rng.permutation(len(src_y))
src_train, src_val = perm[:640], perm[640:]
dataloaders = {
    'source_train': DataLoader(CWRUSignals(src_x[src_train], src_y[src_train]), batch_size=args.batch_size,
                               shuffle=True, drop_last=True),
    'source_val': DataLoader(CWRUSignals(src_x[src_val], src_y[src_val]), batch_size=80),
    'target_train': DataLoader(CWRUSignals(tgt_x, tgt_y), batch_size=args.batch_size, shuffle=True, drop_last=True),
    'target_val': DataLoader(CWRUSignals(tgt_x, tgt_y), batch_size=80),
}

model = CNNFeatures()
bottleneck_layer = nn.Sequential(nn.Linear(model.output_num(), args.bottleneck_num), nn.ReLU(inplace=True),
                                 nn.Dropout())
classifier_layer = nn.Linear(args.bottleneck_num, 4)
max_iter = len(dataloaders['source_train']) * (args.max_epoch - args.middle_epoch)
adversarial_net = AdversarialNet(args.bottleneck_num, args.hidden_size, max_iter, args.trade_off_adversarial)
parameter_list = [{"params": model.parameters(), "lr": args.lr},
                  {"params": bottleneck_layer.parameters(), "lr": args.lr},
                  {"params": classifier_layer.parameters(), "lr": args.lr},
                  {"params": adversarial_net.parameters(), "lr": args.lr}]
optimizer = torch.optim.Adam(parameter_list, lr=args.lr, weight_decay=1e-5)
criterion = nn.CrossEntropyLoss()
adversarial_loss_fn = nn.BCELoss()

step = 0
for epoch in range(args.max_epoch):
    iter_target = iter(dataloaders['target_train'])
    for phase in ['source_train', 'source_val', 'target_val']:
        is_train = phase == 'source_train'
        for m in (model, bottleneck_layer, classifier_layer, adversarial_net):
            m.train(is_train)
        epoch_loss, epoch_acc, epoch_length = 0.0, 0, 0
        for batch_idx, (inputs, labels) in enumerate(dataloaders[phase]):
            if phase == 'source_train' and epoch >= args.middle_epoch:
                try:
                    target_inputs, _ = next(iter_target)
                except StopIteration:
                    iter_target = iter(dataloaders['target_train'])
                    target_inputs, _ = next(iter_target)
                inputs = torch.cat((inputs, target_inputs), dim=0)
            with torch.set_grad_enabled(is_train):
                features = bottleneck_layer(model(inputs))
                outputs = classifier_layer(features)
                if phase != 'source_train' or epoch < args.middle_epoch:
                    logits = outputs
                    loss = criterion(logits, labels)
                else:
                    logits = outputs.narrow(0, 0, labels.size(0))
                    classifier_loss = criterion(logits, labels)
                    domain_label_source = torch.ones(labels.size(0)).float()
                    domain_label_target = torch.zeros(inputs.size(0) - labels.size(0)).float()
                    adversarial_label = torch.cat((domain_label_source, domain_label_target), dim=0)
                    adversarial_out = adversarial_net(features)
                    adversarial_loss = adversarial_loss_fn(adversarial_out, adversarial_label)
                    loss = classifier_loss + adversarial_loss
                pred = logits.argmax(dim=1)
                epoch_acc += torch.eq(pred, labels).float().sum().item()
                epoch_loss += loss.item() * labels.size(0)
                epoch_length += labels.size(0)
                if is_train:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    step += 1
                    if step % 25 == 0:
                        print(f"Epoch {epoch} step {step} loss {loss.item():.4f}")
        print(f"Epoch {epoch} {phase}-Loss {epoch_loss / epoch_length:.4f} "
              f"{phase}-Acc {epoch_acc / epoch_length:.4f}")
