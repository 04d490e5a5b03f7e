"""FixMatch (Sohn et al., 2020) semi-supervised training, after kekmodel/FixMatch-pytorch train.py:
50 labelled and 4000 unlabelled 3x16x16 images of 10 classes, weak (flip + shift) and strong
(flip + shift + noise + cutout) views, pseudo-labels from the weak view kept only above a 0.95
confidence threshold, interleaved batches for BatchNorm, cosine schedule with warm-up and an EMA
model for evaluation.
"""
import argparse
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps,
                                    num_cycles=7. / 16., last_epoch=-1):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / \
            float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * no_progress))

    return LambdaLR(optimizer, _lr_lambda, last_epoch)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


class ModelEMA(object):
    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.ema_has_module = hasattr(self.ema, 'module')
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        needs_module = hasattr(model, 'module') and not self.ema_has_module
        with torch.no_grad():
            msd = model.state_dict()
            esd = self.ema.state_dict()
            for k in self.param_keys:
                if needs_module:
                    j = 'module.' + k
                else:
                    j = k
                model_v = msd[j].detach()
                ema_v = esd[k]
                esd[k].copy_(ema_v * self.decay + (1. - self.decay) * model_v)

            for k in self.buffer_keys:
                if needs_module:
                    j = 'module.' + k
                else:
                    j = k
                esd[k].copy_(msd[j])


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


# ---------------------------------------------------------------- data
def make_images(n, rng, protos):
    labels = rng.randint(0, 10, size=n)
    imgs = protos[labels] + 0.3 * rng.randn(n, 3, 16, 16)
    return imgs.astype(np.float32), labels.astype(np.int64)


def make_prototypes(rng):
    protos = np.zeros((10, 3, 16, 16))
    for c in range(10):
        colour = rng.uniform(0.2, 1.0, size=3)
        for _ in range(2):
            r, col = rng.randint(2, 11, size=2)
            h, w = (3, 7) if rng.rand() < 0.5 else (7, 3)
            protos[c, :, r:r + h, col:col + w] += colour[:, None, None]
    return protos


def weak_aug(img, rng):
    if rng.rand() < 0.5:
        img = img[:, :, ::-1]
    dx, dy = rng.randint(-2, 3, size=2)
    img = np.roll(img, (dy, dx), axis=(1, 2))
    return np.ascontiguousarray(img)


def strong_aug(img, rng):
    img = weak_aug(img, rng).copy()
    img = img * rng.uniform(0.6, 1.4) + rng.uniform(-0.3, 0.3)
    img = img + 0.3 * rng.randn(*img.shape).astype(np.float32)
    r, c = rng.randint(0, 12, size=2)
    img[:, r:r + 5, c:c + 5] = 0.5
    return img.astype(np.float32)


class LabeledSet(Dataset):
    def __init__(self, imgs, labels, seed):
        self.imgs, self.labels = imgs, labels
        self.rng = np.random.RandomState(seed)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(weak_aug(self.imgs[i], self.rng)), int(self.labels[i])


class UnlabeledSet(Dataset):
    def __init__(self, imgs, seed):
        self.imgs = imgs
        self.rng = np.random.RandomState(seed)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        img = self.imgs[i]
        return (torch.from_numpy(weak_aug(img, self.rng)), torch.from_numpy(strong_aug(img, self.rng))), -1


class TestSet(Dataset):
    def __init__(self, imgs, labels):
        self.imgs, self.labels = imgs, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.imgs[i]), int(self.labels[i])


# ---------------------------------------------------------------- model
class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout, momentum=0.001)
        self.relu = nn.LeakyReLU(0.1, inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(ConvBlock(3, 16), nn.MaxPool2d(2),
                                      ConvBlock(16, 32), nn.MaxPool2d(2),
                                      ConvBlock(32, 64), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


# ---------------------------------------------------------------- train / test
def test(args, test_loader, model):
    losses, correct, total = AverageMeter(), 0, 0
    model.eval()
    with torch.no_grad():
        for inputs, targets in test_loader:
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            losses.update(loss.item(), inputs.shape[0])
            correct += (outputs.argmax(1) == targets).sum().item()
            total += targets.shape[0]
    return losses.avg, 100.0 * correct / total


def train(args, labeled_trainloader, unlabeled_trainloader, test_loader,
          model, optimizer, ema_model, scheduler):
    labeled_iter = iter(labeled_trainloader)
    unlabeled_iter = iter(unlabeled_trainloader)

    model.train()
    for epoch in range(args.start_epoch, args.epochs):
        losses = AverageMeter()
        losses_x = AverageMeter()
        losses_u = AverageMeter()
        mask_probs = AverageMeter()
        for batch_idx in range(args.eval_step):
            try:
                inputs_x, targets_x = next(labeled_iter)
            except StopIteration:
                labeled_iter = iter(labeled_trainloader)
                inputs_x, targets_x = next(labeled_iter)

            try:
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
            except StopIteration:
                unlabeled_iter = iter(unlabeled_trainloader)
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)

            batch_size = inputs_x.shape[0]
            inputs = interleave(
                torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1)
            targets_x = targets_x
            logits = model(inputs)
            logits = de_interleave(logits, 2 * args.mu + 1)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
            del logits

            Lx = F.cross_entropy(logits_x, targets_x, reduction='mean')

            pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(args.threshold).float()

            Lu = (F.cross_entropy(logits_u_s, targets_u,
                                  reduction='none') * mask).mean()

            loss = Lx + args.lambda_u * Lu
            loss.backward()

            losses.update(loss.item())
            losses_x.update(Lx.item())
            losses_u.update(Lu.item())
            optimizer.step()
            scheduler.step()
            if args.use_ema:
                ema_model.update(model)
            model.zero_grad()

            mask_probs.update(mask.mean().item())
            if (batch_idx + 1) % 20 == 0:
                print("Train Epoch: {}/{:4}. Iter: {:4}/{:4}. LR: {:.4f}. Loss: {:.4f}. Loss_x: {:.4f}. "
                      "Loss_u: {:.4f}. Mask: {:.2f}. ".format(
                          epoch + 1, args.epochs, batch_idx + 1, args.eval_step,
                          scheduler.get_last_lr()[0], losses.avg, losses_x.avg, losses_u.avg, mask_probs.avg))

        if args.use_ema:
            test_model = ema_model.ema
        else:
            test_model = model
        test_loss, test_acc = test(args, test_loader, test_model)
        model.train()
        print("Epoch {}: test loss {:.4f}, top-1 acc {:.2f} (EMA model)".format(epoch + 1, test_loss, test_acc))


def main():
    parser = argparse.ArgumentParser(description='PyTorch FixMatch Training')
    parser.add_argument('--num-labeled', type=int, default=50)
    parser.add_argument('--epochs', type=int, default=4)
    parser.add_argument('--eval-step', type=int, default=60)
    parser.add_argument('--start-epoch', default=0, type=int)
    parser.add_argument('--batch-size', default=10, type=int)
    parser.add_argument('--lr', default=0.03, type=float)
    parser.add_argument('--warmup', default=0, type=float)
    parser.add_argument('--wdecay', default=5e-4, type=float)
    parser.add_argument('--nesterov', action='store_true', default=True)
    parser.add_argument('--use-ema', action='store_true', default=True)
    parser.add_argument('--ema-decay', default=0.99, type=float)
    parser.add_argument('--mu', default=7, type=int)
    parser.add_argument('--lambda-u', default=1, type=float)
    parser.add_argument('--T', default=1, type=float)
    parser.add_argument('--threshold', default=0.95, type=float)
    parser.add_argument('--seed', default=5, type=int)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    rng = np.random.RandomState(args.seed)
    protos = make_prototypes(rng)
    x_all, y_all = make_images(4000, rng, protos)
    labeled_idx = np.concatenate([np.where(y_all == c)[0][:args.num_labeled // 10] for c in range(10)])
    x_test, y_test = make_images(1000, rng, protos)

    labeled_dataset = LabeledSet(x_all[labeled_idx], y_all[labeled_idx], args.seed + 1)
    unlabeled_dataset = UnlabeledSet(x_all, args.seed + 2)
    test_dataset = TestSet(x_test, y_test)

    labeled_trainloader = DataLoader(labeled_dataset, sampler=RandomSampler(labeled_dataset),
                                     batch_size=args.batch_size, drop_last=True)
    unlabeled_trainloader = DataLoader(unlabeled_dataset, sampler=RandomSampler(unlabeled_dataset),
                                       batch_size=args.batch_size * args.mu, drop_last=True)
    test_loader = DataLoader(test_dataset, sampler=SequentialSampler(test_dataset), batch_size=250)

    model = SmallNet(num_classes=10)

    no_decay = ['bias', 'bn']
    grouped_parameters = [
        {'params': [p for n, p in model.named_parameters() if not any(
            nd in n for nd in no_decay)], 'weight_decay': args.wdecay},
        {'params': [p for n, p in model.named_parameters() if any(
            nd in n for nd in no_decay)], 'weight_decay': 0.0}
    ]
    optimizer = optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=args.nesterov)

    args.total_steps = args.epochs * args.eval_step
    scheduler = get_cosine_schedule_with_warmup(optimizer, args.warmup, args.total_steps)

    ema_model = None
    if args.use_ema:
        ema_model = ModelEMA(model, args.ema_decay)

    model.zero_grad()
    train(args, labeled_trainloader, unlabeled_trainloader, test_loader,
          model, optimizer, ema_model, scheduler)


if __name__ == '__main__':
    main()
