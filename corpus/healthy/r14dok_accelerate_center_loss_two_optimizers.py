"""Softmax + center loss (Wen et al., ECCV 2016) with a 2-D feature layer, after
KaiyangZhou/pytorch-center-loss (main.py, center_loss.py, models.py), run through accelerate.

The class centers are the CenterLoss module's parameters and have their own SGD optimizer; their
gradients are divided by weight_cent before that optimizer steps, so the weight of the center
term only affects the network, not how fast the centers move.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, Dataset


class CenterLoss(nn.Module):
    """Center loss.

    Args:
        num_classes (int): number of classes.
        feat_dim (int): feature dimension.
    """
    def __init__(self, num_classes=10, feat_dim=2):
        super(CenterLoss, self).__init__()
        self.num_classes = num_classes
        self.feat_dim = feat_dim
        self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim))

    def forward(self, x, labels):
        """
        Args:
            x: feature matrix with shape (batch_size, feat_dim).
            labels: ground truth labels with shape (batch_size).
        """
        batch_size = x.size(0)
        distmat = torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) + \
                  torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes, batch_size).t()
        distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)

        classes = torch.arange(self.num_classes, device=x.device).long()
        labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
        mask = labels.eq(classes.expand(batch_size, self.num_classes))

        dist = distmat * mask.float()
        loss = dist.clamp(min=1e-12, max=1e+12).sum() / batch_size

        return loss


class ConvNet(nn.Module):
    """LeNet++ as described in the center loss paper, shrunk for 16x16 inputs."""
    def __init__(self, num_classes):
        super(ConvNet, self).__init__()
        self.conv1_1 = nn.Conv2d(1, 16, 5, stride=1, padding=2)
        self.prelu1_1 = nn.PReLU()
        self.conv1_2 = nn.Conv2d(16, 16, 5, stride=1, padding=2)
        self.prelu1_2 = nn.PReLU()

        self.conv2_1 = nn.Conv2d(16, 32, 5, stride=1, padding=2)
        self.prelu2_1 = nn.PReLU()
        self.conv2_2 = nn.Conv2d(32, 32, 5, stride=1, padding=2)
        self.prelu2_2 = nn.PReLU()

        self.fc1 = nn.Linear(32 * 4 * 4, 2)
        self.prelu_fc1 = nn.PReLU()
        self.fc2 = nn.Linear(2, num_classes)

    def forward(self, x):
        x = self.prelu1_1(self.conv1_1(x))
        x = self.prelu1_2(self.conv1_2(x))
        x = F.max_pool2d(x, 2)

        x = self.prelu2_1(self.conv2_1(x))
        x = self.prelu2_2(self.conv2_2(x))
        x = F.max_pool2d(x, 2)

        x = x.view(-1, 32 * 4 * 4)
        x = self.prelu_fc1(self.fc1(x))
        y = self.fc2(x)

        return x, y


class ShapesDataset(Dataset):
    """Noisy 16x16 bar/blob patterns of 10 classes."""
    def __init__(self, n, prototypes, generator):
        self.labels = torch.randint(0, 10, (n,), generator=generator)
        imgs = prototypes[self.labels]
        shifts = torch.randint(-1, 2, (n, 2), generator=generator)
        imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), dims=(0, 1)) for im, s in zip(imgs, shifts)])
        imgs = imgs + 0.5 * torch.randn(imgs.shape, generator=generator)
        self.data = imgs.unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.data[idx], self.labels[idx]


def make_prototypes(generator):
    protos = torch.zeros(10, 16, 16)
    for c in range(10):
        for _ in range(2):
            r, col = torch.randint(2, 11, (2,), generator=generator).tolist()
            h, w = (2, 6) if torch.rand(1, generator=generator).item() < 0.5 else (6, 2)
            protos[c, r:r + h, col:col + w] = 1.0
    return protos


def train(accelerator, model, criterion_xent, criterion_cent, optimizer_model, optimizer_centloss,
          trainloader, args, epoch):
    model.train()
    xent_sum, cent_sum, n = 0.0, 0.0, 0

    for batch_idx, (data, labels) in enumerate(trainloader):
        features, outputs = model(data)
        loss_xent = criterion_xent(outputs, labels)
        loss_cent = criterion_cent(features, labels)
        loss_cent *= args.weight_cent
        loss = loss_xent + loss_cent
        optimizer_model.zero_grad()
        optimizer_centloss.zero_grad()
        accelerator.backward(loss)
        optimizer_model.step()
        # by doing so, weight_cent would not impact on the learning of centers
        for param in criterion_cent.parameters():
            param.grad.data *= (1. / args.weight_cent)
        optimizer_centloss.step()

        xent_sum += loss_xent.item()
        cent_sum += loss_cent.item()
        n += 1
        if (batch_idx + 1) % args.print_freq == 0:
            accelerator.print("Epoch {} Batch {}/{}\t Loss {:.6f} XentLoss {:.6f} ({:.6f}) CenterLoss {:.6f} ({:.6f})"
                              .format(epoch + 1, batch_idx + 1, len(trainloader), loss.item(),
                                      loss_xent.item(), xent_sum / n, loss_cent.item(), cent_sum / n))


def test(accelerator, model, testloader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for data, labels in testloader:
            features, outputs = model(data)
            predictions = outputs.argmax(1)
            predictions, labels = accelerator.gather_for_metrics((predictions, labels))
            total += labels.size(0)
            correct += (predictions == labels).sum().item()
    acc = correct * 100. / total
    return acc, 100. - acc


def main():
    parser = argparse.ArgumentParser("Center Loss Example")
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--lr-model', type=float, default=0.01, help="learning rate for model")
    parser.add_argument('--lr-cent', type=float, default=0.5, help="learning rate for center loss")
    parser.add_argument('--weight-cent', type=float, default=0.1, help="weight for center loss")
    parser.add_argument('--max-epoch', type=int, default=6)
    parser.add_argument('--stepsize', type=int, default=4)
    parser.add_argument('--gamma', type=float, default=0.5, help="learning rate decay")
    parser.add_argument('--print-freq', type=int, default=15)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()

    set_seed(args.seed)
    accelerator = Accelerator(cpu=True)

    g = torch.Generator().manual_seed(args.seed)
    protos = make_prototypes(g)
    trainloader = DataLoader(ShapesDataset(3000, protos, g), batch_size=args.batch_size, shuffle=True)
    testloader = DataLoader(ShapesDataset(1000, protos, g), batch_size=256, shuffle=False)

    accelerator.print("Creating model: cnn")
    model = ConvNet(num_classes=10)

    criterion_xent = nn.CrossEntropyLoss()
    criterion_cent = CenterLoss(num_classes=10, feat_dim=2)
    optimizer_model = torch.optim.SGD(model.parameters(), lr=args.lr_model, weight_decay=5e-04, momentum=0.9)
    optimizer_centloss = torch.optim.SGD(criterion_cent.parameters(), lr=args.lr_cent)
    scheduler = lr_scheduler.StepLR(optimizer_model, step_size=args.stepsize, gamma=args.gamma)

    model, criterion_cent, optimizer_model, optimizer_centloss, trainloader, testloader, scheduler = \
        accelerator.prepare(model, criterion_cent, optimizer_model, optimizer_centloss,
                            trainloader, testloader, scheduler)

    acc, err = test(accelerator, model, testloader)
    accelerator.print("==> Before training: Accuracy (%): {:.2f}  Error rate (%): {:.2f}".format(acc, err))
    for epoch in range(args.max_epoch):
        accelerator.print("==> Epoch {}/{}".format(epoch + 1, args.max_epoch))
        train(accelerator, model, criterion_xent, criterion_cent, optimizer_model, optimizer_centloss,
              trainloader, args, epoch)
        scheduler.step()
        acc, err = test(accelerator, model, testloader)
        accelerator.print("==> Test Accuracy (%): {:.2f}  Error rate (%): {:.2f}".format(acc, err))


if __name__ == '__main__':
    main()
