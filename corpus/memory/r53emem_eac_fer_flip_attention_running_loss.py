"""Facial expression recognition with Erasing Attention Consistency (EAC style): a ResNet
backbone classifies 7 expressions; the class activation maps of an image and of its horizontally
flipped copy are kept consistent with a flip-equivariance loss (ACLoss)."""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument('--batch_size', type=int, default=8, help='batch_size')
parser.add_argument('--w', type=int, default=4, help='width of the attention map')
parser.add_argument('--h', type=int, default=4, help='height of the attention map')
parser.add_argument('--lam', type=float, default=5, help='kl_lambda')
parser.add_argument('--epochs', type=int, default=2, help='number of epochs')
args = parser.parse_args()


def setup_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


class RafDataset(Dataset):
    def __init__(self, n, phase, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 7, (n,), generator=g)
        protos = torch.randn(7, 3, 32, 32, generator=torch.Generator().manual_seed(123))
        self.images = 1.0 * protos[self.labels] + torch.randn(n, 3, 32, 32, generator=g)
        self.phase = phase

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        image = self.images[idx]
        if self.phase == 'train' and torch.rand(1).item() < 0.5:
            image = image.flip(2)
        image1 = image
        image2 = image.flip(2)
        return image1, self.labels[idx], idx, image2


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Model(nn.Module):
    def __init__(self, num_classes=7):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.features = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 64, 2))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.features(self.stem(x))
        feature = x
        output = self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
        params = list(self.parameters())
        fc_weights = params[-2].view(1, 7, 64, 1, 1)
        feat = feature.unsqueeze(1)
        hm = (feat * fc_weights).sum(2)
        return output, hm


def generate_flip_grid(w, h, device):
    x_ = torch.arange(w).view(1, -1).expand(h, -1)
    y_ = torch.arange(h).view(-1, 1).expand(-1, w)
    grid = torch.stack([x_, y_], dim=0).float().to(device)
    grid = grid.unsqueeze(0).expand(1, -1, -1, -1)
    grid[:, 0, :, :] = 2 * grid[:, 0, :, :] / (w - 1) - 1
    grid[:, 1, :, :] = 2 * grid[:, 1, :, :] / (h - 1) - 1
    grid[:, 0, :, :] = -grid[:, 0, :, :]
    return grid


def ACLoss(att_map1, att_map2, grid_l, output):
    flip_grid_large = grid_l.expand(output.size(0), -1, -1, -1)
    flip_grid_large = flip_grid_large.permute(0, 2, 3, 1)
    att_map2_flip = F.grid_sample(att_map2, flip_grid_large, mode='bilinear', padding_mode='border', align_corners=True)
    flip_loss_l = F.mse_loss(att_map1, att_map2_flip)
    return flip_loss_l


def train(args, model, train_loader, optimizer, scheduler, device):
    running_loss = 0.0
    iter_cnt = 0
    correct_sum = 0
    model.train()
    for batch_i, (imgs1, labels, indexes, imgs2) in enumerate(train_loader):
        imgs1 = imgs1.to(device)
        imgs2 = imgs2.to(device)
        labels = labels.to(device)

        output, hm1 = model(imgs1)
        output_flip, hm2 = model(imgs2)

        grid_l = generate_flip_grid(args.w, args.h, device)

        loss1 = nn.CrossEntropyLoss()(output, labels)
        flip_loss_l = ACLoss(hm1, hm2, grid_l, output)

        loss = loss1 + args.lam * flip_loss_l

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        iter_cnt += 1
        _, predicts = torch.max(output, 1)
        correct_num = torch.eq(predicts, labels).sum()
        correct_sum += correct_num
        running_loss += loss
        if iter_cnt % 25 == 0:
            print(f'  iter {iter_cnt} ce {loss1.item():.4f} flip {flip_loss_l.item():.5f}')

    scheduler.step()
    running_loss = running_loss / iter_cnt
    acc = correct_sum.float() / float(train_loader.dataset.__len__())
    return acc, running_loss


def test(model, test_loader, device):
    with torch.no_grad():
        model.eval()
        running_loss = 0.0
        iter_cnt = 0
        correct_sum = 0
        data_num = 0
        for batch_i, (imgs1, labels, indexes, imgs2) in enumerate(test_loader):
            outputs, _ = model(imgs1.to(device))
            loss = nn.CrossEntropyLoss()(outputs, labels)
            iter_cnt += 1
            _, predicts = torch.max(outputs, 1)
            correct_sum += torch.eq(predicts, labels).sum()
            running_loss += loss
            data_num += outputs.size(0)
        running_loss = running_loss / iter_cnt
        test_acc = correct_sum.float() / float(data_num)
    return test_acc, running_loss


def main():
    setup_seed(0)
    train_dataset = RafDataset(720, 'train', 1)
    test_dataset = RafDataset(320, 'test', 2)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_dataset, batch_size=64, shuffle=False)

    model = Model()
    device = torch.device('cpu')
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)

    start = time.time()
    for i in range(1, args.epochs + 1):
        train_acc, train_loss = train(args, model, train_loader, optimizer, scheduler, device)
        test_acc, test_loss = test(model, test_loader, device)
        print(f'epoch {i} train acc {train_acc:.4f} train loss {train_loss:.4f} '
              f'test acc {test_acc:.4f} test loss {test_loss:.4f} ({time.time() - start:.1f}s)')


if __name__ == '__main__':
    main()
