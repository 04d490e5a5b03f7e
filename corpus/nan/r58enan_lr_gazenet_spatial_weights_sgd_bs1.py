"""Appearance-based gaze estimation on MPIIFaceGaze-style normalized face images (a GazeNet with
the spatial-weights CNN head: 1x1 conv maps that re-weight the feature map before the fully
connected regressor), trained leave-one-subject-out on (pitch, yaw) with an MSE loss.
Faces are synthetic: an oval face with two eyes whose pupils move with the gaze direction."""
import argparse
import logging
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data

logging.basicConfig(format='[%(asctime)s %(name)s %(levelname)s] - %(message)s',
                    datefmt='%Y/%m/%d %H:%M:%S', level=logging.DEBUG)
logger = logging.getLogger(__name__)


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, num):
        self.val = val
        self.sum += val * num
        self.count += num
        self.avg = self.sum / self.count


def convert_to_unit_vector(angles):
    x = -torch.cos(angles[:, 0]) * torch.sin(angles[:, 1])
    y = -torch.sin(angles[:, 0])
    z = -torch.cos(angles[:, 0]) * torch.cos(angles[:, 1])
    norm = torch.sqrt(x ** 2 + y ** 2 + z ** 2)
    return x / norm, y / norm, z / norm


def compute_angle_error(preds, labels):
    pred_x, pred_y, pred_z = convert_to_unit_vector(preds)
    label_x, label_y, label_z = convert_to_unit_vector(labels)
    angles = pred_x * label_x + pred_y * label_y + pred_z * label_z
    return torch.acos(angles.clamp(-1.0, 1.0)) * 180 / np.pi


class MPIIFaceGazeDataset(torch.utils.data.Dataset):
    """Synthetic stand-in for one subject's normalized face images and (pitch, yaw) labels."""

    def __init__(self, subject_id, n=20, size=64):
        rng = np.random.RandomState(100 + subject_id)
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        skin = rng.uniform(0.45, 0.8)
        images, gazes = [], []
        for _ in range(n):
            pitch, yaw = rng.uniform(-0.35, 0.35), rng.uniform(-0.5, 0.5)
            light = rng.uniform(0.7, 1.1)
            face = ((xx - 0.5) ** 2 / 0.16 + (yy - 0.52) ** 2 / 0.22 < 1).astype(np.float32)
            img = np.stack([face * skin * light, face * skin * 0.8 * light, face * skin * 0.7 * light])
            for ex in (0.35, 0.65):
                ey = 0.42
                eye = ((xx - ex) ** 2 / 0.012 + (yy - ey) ** 2 / 0.004 < 1)
                img[:, eye] = 0.95
                px, py = ex + 0.14 * np.sin(yaw), ey - 0.09 * np.sin(pitch)
                pupil = ((xx - px) ** 2 + (yy - py) ** 2) < 0.0012
                img[:, pupil] = 0.05
            img += rng.normal(0, 0.03, img.shape).astype(np.float32)
            images.append(np.clip(img * 255, 0, 255).astype(np.uint8))
            gazes.append([pitch, yaw])
        self.images = np.stack(images)
        self.gazes = np.array(gazes, dtype=np.float32)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index][[2, 1, 0], :, :].astype(np.float32)), torch.from_numpy(self.gazes[index])

    def __len__(self):
        return len(self.images)


def get_loader(test_subject_id, batch_size):
    train_dataset = torch.utils.data.ConcatDataset([
        MPIIFaceGazeDataset(subject_id) for subject_id in range(15) if subject_id != test_subject_id])
    test_dataset = MPIIFaceGazeDataset(test_subject_id)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size, shuffle=True, drop_last=True)
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=32, shuffle=False)
    return train_loader, test_loader


class GazeNet(nn.Module):
    def __init__(self):
        super(GazeNet, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=5, stride=2, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 128, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(128, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.Conv1 = nn.Conv2d(in_channels=256, out_channels=256, kernel_size=1, stride=1, padding=0)
        self.Conv2 = nn.Conv2d(in_channels=256, out_channels=256, kernel_size=1, stride=1, padding=0)
        self.Conv3 = nn.Conv2d(in_channels=256, out_channels=1, kernel_size=1, stride=1, padding=0)
        self.layer1 = nn.Sequential(nn.Linear(256 * 3 * 3, 512), nn.ReLU(), nn.Dropout(0.5))
        self.layer2 = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.5))
        self.fc = nn.Linear(512, 2)
        nn.init.normal_(self.Conv1.weight, mean=0.0, std=0.01)
        nn.init.normal_(self.Conv2.weight, mean=0.0, std=0.01)
        nn.init.normal_(self.Conv3.weight, mean=0.0, std=0.001)
        nn.init.constant_(self.Conv1.bias, val=0.1)
        nn.init.constant_(self.Conv2.bias, val=0.1)
        nn.init.constant_(self.Conv3.bias, val=1)

    def forward(self, x):
        x = self.features(x)
        y = F.relu(self.Conv1(x))
        y = F.relu(self.Conv2(y))
        y = F.relu(self.Conv3(y))
        x = F.dropout(F.relu(torch.mul(x, y)), 0.5, training=self.training)
        x = x.view(x.size(0), -1)
        x = self.layer1(x)
        x = self.layer2(x)
        return self.fc(x)


def train(epoch, model, optimizer, criterion, train_loader):
    logger.info('Train {}'.format(epoch))
    model.train()
    loss_meter = AverageMeter()
    angle_error_meter = AverageMeter()
    start = time.time()
    for step, (images, gazes) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = model(images)
        loss = criterion(outputs, gazes)
        loss.backward()
        optimizer.step()

        angle_error = compute_angle_error(outputs, gazes).mean()
        num = images.size(0)
        loss_meter.update(loss.item(), num)
        angle_error_meter.update(angle_error.item(), num)
        if step % 25 == 0:
            logger.info('Epoch {} Step {}/{} Loss {:.4f} ({:.4f}) AngleError {:.2f} ({:.2f})'.format(
                epoch, step, len(train_loader), loss_meter.val, loss_meter.avg,
                angle_error_meter.val, angle_error_meter.avg))
    logger.info('Elapsed {:.2f}'.format(time.time() - start))


def test(epoch, model, criterion, test_loader):
    logger.info('Test {}'.format(epoch))
    model.eval()
    loss_meter = AverageMeter()
    angle_error_meter = AverageMeter()
    for step, (images, gazes) in enumerate(test_loader):
        with torch.no_grad():
            outputs = model(images)
        loss = criterion(outputs, gazes)
        angle_error = compute_angle_error(outputs, gazes).mean()
        num = images.size(0)
        loss_meter.update(loss.item(), num)
        angle_error_meter.update(angle_error.item(), num)
    logger.info('Epoch {} Loss {:.4f} AngleError {:.2f}'.format(epoch, loss_meter.avg, angle_error_meter.avg))
    return angle_error_meter.avg


def main(args):
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    train_loader, test_loader = get_loader(args.test_id, args.batch_size)
    model = GazeNet()
    criterion = nn.MSELoss(reduction='mean')
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=args.momentum,
                                weight_decay=args.weight_decay, nesterov=args.nesterov)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[20, 30], gamma=args.lr_decay)
    test(0, model, criterion, test_loader)
    for epoch in range(1, args.epochs + 1):
        train(epoch, model, optimizer, criterion, train_loader)
        scheduler.step()
        test(epoch, model, criterion, test_loader)


def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument('--test_id', type=int, default=0)
    parser.add_argument('--seed', type=int, default=6)
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--batch_size', type=int, default=1)
    parser.add_argument('--base_lr', type=float, default=0.01)
    parser.add_argument('--weight_decay', type=float, default=1e-4)
    parser.add_argument('--momentum', type=float, default=0.9)
    parser.add_argument('--nesterov', type=bool, default=True)
    parser.add_argument('--lr_decay', type=float, default=0.1)
    return parser.parse_args()


if __name__ == '__main__':
    main(parse_arguments())
