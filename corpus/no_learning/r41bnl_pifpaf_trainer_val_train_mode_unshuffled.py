"""Frame-level activity classification on video clips with a small conv/BatchNorm
base network and a linear head, trained by a Trainer modelled on the openpifpaf one
(train / val epochs, per-batch logging, optional fixed batch norm).

Offline stand-in for the video data set: every clip is a sequence of 24x24 frames of a
drifting texture whose orientation and frequency depend on the activity class."""
import logging
import math
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format='%(message)s')
LOG = logging.getLogger(__name__)

N_CLASSES = 5
FRAMES_PER_CLIP = 32


class VideoFrames(Dataset):
    def __init__(self, n_clips, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(24.0), torch.arange(24.0), indexing='ij')
        frames, labels = [], []
        for clip in range(n_clips):
            label = clip % N_CLASSES
            angle = label * math.pi / N_CLASSES + 0.15 * torch.randn(1, generator=g).item()
            freq = 0.35 + 0.12 * label
            phase0 = 2 * math.pi * torch.rand(1, generator=g).item()
            speed = 0.3 + 0.2 * torch.rand(1, generator=g).item()
            contrast = 0.6 + 0.8 * torch.rand(1, generator=g).item()
            for t in range(FRAMES_PER_CLIP):
                u = xx * math.cos(angle) + yy * math.sin(angle)
                img = contrast * torch.sin(freq * u + phase0 + speed * t)
                img = img + 0.5 * torch.randn(img.shape, generator=g)
                frames.append(img.unsqueeze(0))
                labels.append(label)
        self.frames = torch.stack(frames)
        self.labels = torch.tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.frames[i], self.labels[i], i


class BaseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.layers(x)


class Shell(nn.Module):
    def __init__(self, base_net, n_classes):
        super().__init__()
        self.base_net = base_net
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(64, n_classes)

    def forward(self, x):
        return self.head(self.pool(self.base_net(x)).flatten(1))


class Trainer():
    def __init__(self, model, loss, optimizer, *, log_interval=10, fix_batch_norm=False):
        self.model = model
        self.loss = loss
        self.optimizer = optimizer
        self.log_interval = log_interval
        self.fix_batch_norm = fix_batch_norm

    def lr(self):
        for param_group in self.optimizer.param_groups:
            return param_group['lr']

    def loop(self, train_scenes, val_scenes, epochs, start_epoch=0):
        for epoch in range(start_epoch, epochs):
            self.train(train_scenes, epoch)
            self.val(val_scenes, epoch + 1)

    def train_batch(self, data, targets):
        outputs = self.model(data)
        loss = self.loss(outputs, targets)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return float(loss.item())

    def val_batch(self, data, targets):
        with torch.no_grad():
            outputs = self.model(data)
            loss = self.loss(outputs, targets)
        n_correct = int((outputs.argmax(dim=1) == targets).sum())
        return float(loss.item()), n_correct

    def train(self, scenes, epoch):
        start_time = time.time()
        self.model.train()
        if self.fix_batch_norm:
            for m in self.model.modules():
                if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                    m.eval()

        epoch_loss = 0.0
        self.optimizer.zero_grad()
        for batch_idx, (data, target, _) in enumerate(scenes):
            loss = self.train_batch(data, target)
            epoch_loss += loss
            if batch_idx % self.log_interval == 0:
                LOG.info({'type': 'train', 'epoch': epoch, 'batch': batch_idx, 'n_batches': len(scenes),
                          'lr': round(self.lr(), 8), 'loss': round(loss, 3)})
        LOG.info({'type': 'train-epoch', 'epoch': epoch + 1, 'loss': round(epoch_loss / len(scenes), 5),
                  'time': round(time.time() - start_time, 1)})

    def val(self, scenes, epoch):
        start_time = time.time()

        # Train mode implies outputs are for losses, so have to use it here.
        self.model.train()
        if self.fix_batch_norm:
            for m in self.model.modules():
                if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                    m.eval()

        epoch_loss = 0.0
        n_correct, n_seen = 0, 0
        for data, target, _ in scenes:
            loss, correct = self.val_batch(data, target)
            epoch_loss += loss
            n_correct += correct
            n_seen += len(target)

        LOG.info({'type': 'val-epoch', 'epoch': epoch, 'loss': round(epoch_loss / len(scenes), 5),
                  'accuracy': round(n_correct / n_seen, 4), 'time': round(time.time() - start_time, 1)})


def main():
    torch.manual_seed(0)
    train_data = VideoFrames(n_clips=30, seed=1)
    val_data = VideoFrames(n_clips=10, seed=2)
    train_loader = DataLoader(train_data, batch_size=16, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_data, batch_size=16, shuffle=False, drop_last=True)

    model = Shell(BaseNet(), N_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-5)
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, log_interval=20)
    trainer.loop(train_loader, val_loader, epochs=3)


if __name__ == '__main__':
    main()
