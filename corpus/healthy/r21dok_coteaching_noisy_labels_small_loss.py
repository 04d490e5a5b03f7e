"""Co-teaching (Han et al., NeurIPS 2018) on a synthetic 10-class image set whose training
labels are corrupted with 50% symmetric noise, after bhanML/Co-teaching main.py / loss.py.

Two CNNs see the same mini-batch; each ranks the samples by its own cross-entropy, keeps the
(1 - forget_rate) fraction with the smallest loss, and its peer is updated on those samples.
The forget rate ramps up to the noise rate over the first epochs; Adam's lr and beta1 are
decayed linearly near the end, as in the reference code. Test accuracy is on clean labels.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.001)
parser.add_argument("--noise_rate", type=float, default=0.5)
parser.add_argument("--forget_rate", type=float, default=None)
parser.add_argument("--num_gradual", type=int, default=6)
parser.add_argument("--exponent", type=float, default=1)
parser.add_argument("--n_epoch", type=int, default=8)
parser.add_argument("--epoch_decay_start", type=int, default=5)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

torch.manual_seed(args.seed)
np.random.seed(args.seed)
num_classes = 10


def make_images(n, protos, gen):
    labels = torch.randint(0, num_classes, (n,), generator=gen)
    imgs = protos[labels] + 0.7 * torch.randn(n, 1, 16, 16, generator=gen)
    shifts = torch.randint(-1, 2, (n, 2), generator=gen)
    for i in range(n):
        imgs[i] = torch.roll(imgs[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2))
    return imgs, labels


class NoisyShapes(Dataset):
    def __init__(self, imgs, labels, noise_rate, gen):
        self.imgs = imgs
        self.train_labels = labels.clone()
        if noise_rate > 0:
            flip = torch.rand(len(labels), generator=gen) < noise_rate
            other = (labels + torch.randint(1, num_classes, (len(labels),), generator=gen)) % num_classes
            self.train_labels[flip] = other[flip]
        self.noise_or_not = (self.train_labels == labels).numpy()

    def __len__(self):
        return len(self.train_labels)

    def __getitem__(self, index):
        return self.imgs[index], self.train_labels[index], index


class CNN(nn.Module):
    def __init__(self, input_channel=1, n_outputs=10, dropout_rate=0.25, momentum=0.1):
        super().__init__()
        self.dropout_rate = dropout_rate
        self.c1 = nn.Conv2d(input_channel, 16, kernel_size=3, stride=1, padding=1)
        self.c2 = nn.Conv2d(16, 16, kernel_size=3, stride=1, padding=1)
        self.c3 = nn.Conv2d(16, 32, kernel_size=3, stride=1, padding=1)
        self.c4 = nn.Conv2d(32, 32, kernel_size=3, stride=1, padding=1)
        self.l_c1 = nn.Linear(32, n_outputs)
        self.bn1 = nn.BatchNorm2d(16, momentum=momentum)
        self.bn2 = nn.BatchNorm2d(16, momentum=momentum)
        self.bn3 = nn.BatchNorm2d(32, momentum=momentum)
        self.bn4 = nn.BatchNorm2d(32, momentum=momentum)

    def forward(self, x):
        h = F.leaky_relu(self.bn1(self.c1(x)), negative_slope=0.01)
        h = F.leaky_relu(self.bn2(self.c2(h)), negative_slope=0.01)
        h = F.max_pool2d(h, kernel_size=2, stride=2)
        h = F.dropout2d(h, p=self.dropout_rate, training=self.training)
        h = F.leaky_relu(self.bn3(self.c3(h)), negative_slope=0.01)
        h = F.leaky_relu(self.bn4(self.c4(h)), negative_slope=0.01)
        h = F.avg_pool2d(h, kernel_size=h.shape[2])
        h = h.view(h.size(0), h.size(1))
        return self.l_c1(h)


def loss_coteaching(y_1, y_2, t, forget_rate, ind, noise_or_not):
    loss_1 = F.cross_entropy(y_1, t, reduction="none")
    ind_1_sorted = np.argsort(loss_1.data.cpu().numpy())
    loss_2 = F.cross_entropy(y_2, t, reduction="none")
    ind_2_sorted = np.argsort(loss_2.data.cpu().numpy())

    remember_rate = 1 - forget_rate
    num_remember = int(remember_rate * len(ind_1_sorted))

    pure_ratio_1 = np.sum(noise_or_not[ind[ind_1_sorted[:num_remember]]]) / float(num_remember)
    pure_ratio_2 = np.sum(noise_or_not[ind[ind_2_sorted[:num_remember]]]) / float(num_remember)

    ind_1_update = torch.from_numpy(ind_1_sorted[:num_remember])
    ind_2_update = torch.from_numpy(ind_2_sorted[:num_remember])
    # exchange
    loss_1_update = F.cross_entropy(y_1[ind_2_update], t[ind_2_update])
    loss_2_update = F.cross_entropy(y_2[ind_1_update], t[ind_1_update])
    return torch.sum(loss_1_update) / num_remember, torch.sum(loss_2_update) / num_remember, pure_ratio_1, pure_ratio_2


def accuracy(logit, target):
    return (logit.argmax(1) == target).float().mean().item() * 100


gen = torch.Generator().manual_seed(args.seed)
protos = F.interpolate(torch.randn(num_classes, 1, 4, 4, generator=gen), size=16, mode="bilinear", align_corners=False)
protos = protos / protos.std(dim=(1, 2, 3), keepdim=True)
train_x, train_y = make_images(1536, protos, gen)
test_x, test_y = make_images(1000, protos, gen)
train_dataset = NoisyShapes(train_x, train_y, args.noise_rate, gen)
print("actual noise rate in training labels: %.3f" % (1 - train_dataset.noise_or_not.mean()))
train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
test_loader = DataLoader(list(zip(test_x, test_y)), batch_size=256, shuffle=False)

forget_rate = args.noise_rate if args.forget_rate is None else args.forget_rate
mom1, mom2 = 0.9, 0.1
alpha_plan = [args.lr] * args.n_epoch
beta1_plan = [mom1] * args.n_epoch
for i in range(args.epoch_decay_start, args.n_epoch):
    alpha_plan[i] = float(args.n_epoch - i) / (args.n_epoch - args.epoch_decay_start) * args.lr
    beta1_plan[i] = mom2
rate_schedule = np.ones(args.n_epoch) * forget_rate
rate_schedule[: args.num_gradual] = np.linspace(0, forget_rate ** args.exponent, args.num_gradual)


def adjust_learning_rate(optimizer, epoch):
    for param_group in optimizer.param_groups:
        param_group["lr"] = alpha_plan[epoch]
        param_group["betas"] = (beta1_plan[epoch], 0.999)


def evaluate(model1, model2):
    model1.eval()
    model2.eval()
    correct1 = correct2 = total = 0
    with torch.no_grad():
        for images, labels in test_loader:
            correct1 += (model1(images).argmax(1) == labels).sum().item()
            correct2 += (model2(images).argmax(1) == labels).sum().item()
            total += labels.size(0)
    return 100.0 * correct1 / total, 100.0 * correct2 / total


def train(epoch, cnn1, optimizer1, cnn2, optimizer2):
    cnn1.train()
    cnn2.train()
    pure_1, pure_2, acc_1, acc_2, l1, l2 = [], [], [], [], [], []
    for i, (images, labels, indexes) in enumerate(train_loader):
        ind = indexes.numpy()
        logits1 = cnn1(images)
        logits2 = cnn2(images)
        acc_1.append(accuracy(logits1, labels))
        acc_2.append(accuracy(logits2, labels))
        loss_1, loss_2, pure_ratio_1, pure_ratio_2 = loss_coteaching(
            logits1, logits2, labels, rate_schedule[epoch], ind, train_dataset.noise_or_not)
        pure_1.append(100 * pure_ratio_1)
        pure_2.append(100 * pure_ratio_2)

        optimizer1.zero_grad()
        loss_1.backward()
        optimizer1.step()
        optimizer2.zero_grad()
        loss_2.backward()
        optimizer2.step()
        l1.append(loss_1.item())
        l2.append(loss_2.item())
        if (i + 1) % 6 == 0:
            print("Epoch [%d/%d], Iter [%d/%d] Training Accuracy1: %.4f, Training Accuracy2: %.4f, "
                  "Loss1: %.4f, Loss2: %.4f, Pure Ratio1: %.4f, Pure Ratio2 %.4f"
                  % (epoch + 1, args.n_epoch, i + 1, len(train_loader), acc_1[-1], acc_2[-1],
                     loss_1.item(), loss_2.item(), pure_1[-1], pure_2[-1]))
    return np.mean(acc_1), np.mean(acc_2), np.mean(l1), np.mean(l2), np.mean(pure_1), np.mean(pure_2)


cnn1 = CNN(input_channel=1, n_outputs=num_classes)
optimizer1 = torch.optim.Adam(cnn1.parameters(), lr=args.lr)
cnn2 = CNN(input_channel=1, n_outputs=num_classes)
optimizer2 = torch.optim.Adam(cnn2.parameters(), lr=args.lr)

test_acc1, test_acc2 = evaluate(cnn1, cnn2)
print("Epoch [0/%d] Test Accuracy on the %s test images: Model1 %.4f %% Model2 %.4f %%"
      % (args.n_epoch, len(test_y), test_acc1, test_acc2))
for epoch in range(args.n_epoch):
    adjust_learning_rate(optimizer1, epoch)
    adjust_learning_rate(optimizer2, epoch)
    tr1, tr2, l1, l2, p1, p2 = train(epoch, cnn1, optimizer1, cnn2, optimizer2)
    test_acc1, test_acc2 = evaluate(cnn1, cnn2)
    print("Epoch [%d/%d] forget rate %.3f, train acc %.2f/%.2f, loss %.4f/%.4f, pure ratio %.2f%%/%.2f%%, "
          "Test Accuracy: Model1 %.4f %% Model2 %.4f %%"
          % (epoch + 1, args.n_epoch, rate_schedule[epoch], tr1, tr2, l1, l2, p1, p2, test_acc1, test_acc2))
