"""SimSiam pre-training, after facebookresearch/simsiam main_simsiam.py and simsiam/builder.py.

ImageNet and the ResNet-50 are replaced by synthetic 1x16x16 grating images of 5 kinds
(the kind is the spatial frequency; angle, phase, contrast, offset and a linear
illumination gradient are random) and a small CNN with BatchNorm;
the two-crop augmentation is written with tensor ops (reflect-padded random crop, flip,
rotation, brightness/contrast jitter, an added illumination gradient, noise; no rescaling, which would change the kind). The builder (3-layer projector whose last
BN has no affine, 2-layer bottleneck predictor, stop-gradient on z), the symmetric negative
cosine loss, the lr scaling init_lr = lr * batch_size / 256, the predictor param group with
fix_lr, SGD(momentum 0.9, wd 1e-4) and the per-epoch cosine adjust_learning_rate follow the
original. A kNN monitor on the backbone features (as in the SimSiam colab) tracks progress.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description='SimSiam Training (synthetic textures)')
parser.add_argument('--epochs', default=10, type=int)
parser.add_argument('-b', '--batch-size', default=128, type=int)
parser.add_argument('--lr', '--learning-rate', default=0.2, type=float, dest='lr')
parser.add_argument('--momentum', default=0.9, type=float)
parser.add_argument('--wd', '--weight-decay', default=1e-4, type=float, dest='weight_decay')
parser.add_argument('-p', '--print-freq', default=4, type=int)
parser.add_argument('--seed', default=0, type=int)
parser.add_argument('--dim', default=128, type=int)
parser.add_argument('--pred-dim', default=32, type=int)
parser.add_argument('--fix-pred-lr', action='store_true', default=True, help='Fix learning rate for the predictor')

SIZE = 16
N_KINDS = 5


def make_textures(n, seed):
    g = torch.Generator().manual_seed(seed)
    coords = torch.linspace(-1, 1, SIZE)
    yy, xx = torch.meshgrid(coords, coords, indexing='ij')
    labels = torch.randint(0, N_KINDS, (n,), generator=g)
    angle = torch.randint(0, 4, (n,), generator=g).float() * math.pi / 4
    phase = torch.rand(n, generator=g) * 2 * math.pi
    freq = 1.5 + labels.float() * 0.9 + 0.3 * torch.rand(n, generator=g)
    u = xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None]
    imgs = torch.sin(freq[:, None, None] * math.pi * u + phase[:, None, None])
    contrast = 0.5 + torch.rand(n, 1, 1, generator=g)
    offset = torch.randn(n, 1, 1, generator=g) * 0.5
    shade = torch.randn(n, 2, 1, 1, generator=g) * 1.5
    imgs = imgs * contrast + offset + shade[:, 0] * xx + shade[:, 1] * yy + 0.5 * torch.randn(imgs.shape, generator=g)
    return imgs.unsqueeze(1), labels


def augment(img):
    # RandomCrop(16, padding=4, padding_mode='reflect') + RandomHorizontalFlip + random 90-degree rotation
    img = F.pad(img[None], (4, 4, 4, 4), mode='reflect')[0]
    top = int(torch.randint(0, 9, (1,)))
    left = int(torch.randint(0, 9, (1,)))
    img = img[:, top:top + SIZE, left:left + SIZE]
    if torch.rand(1) < 0.5:
        img = img.flip(-1)
    img = torch.rot90(img, int(torch.randint(0, 4, (1,))), dims=(1, 2))
    # ColorJitter(0.4, 0.4) with p=0.8
    if torch.rand(1) < 0.8:
        img = img * float(torch.empty(1).uniform_(0.6, 1.4)) + float(torch.empty(1).uniform_(-0.4, 0.4))
    # random illumination gradient
    coords = torch.linspace(-1, 1, SIZE)
    yy, xx = torch.meshgrid(coords, coords, indexing='ij')
    img = img + float(torch.randn(1)) * 1.5 * xx + float(torch.randn(1)) * 1.5 * yy
    # GaussianNoise in place of GaussianBlur
    if torch.rand(1) < 0.5:
        img = img + 0.3 * torch.randn_like(img)
    return img


class TwoCropsTransform:
    """Take two random crops of one image as the query and key."""

    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        q = self.base_transform(x)
        k = self.base_transform(x)
        return [q, k]


class TextureDataset(Dataset):
    def __init__(self, images, labels, transform=None):
        self.images = images
        self.labels = labels
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img = self.images[idx]
        if self.transform is not None:
            img = self.transform(img)
        return img, self.labels[idx]


class SmallConvNet(nn.Module):
    def __init__(self, num_classes=512, zero_init_residual=True):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class SimSiam(nn.Module):
    """
    Build a SimSiam model.
    """
    def __init__(self, base_encoder, dim=2048, pred_dim=512):
        super(SimSiam, self).__init__()

        self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)

        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True),
                                        nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True),
                                        self.encoder.fc,
                                        nn.BatchNorm1d(dim, affine=False))
        self.encoder.fc[6].bias.requires_grad = False

        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                       nn.BatchNorm1d(pred_dim),
                                       nn.ReLU(inplace=True),
                                       nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        z1 = self.encoder(x1)
        z2 = self.encoder(x2)

        p1 = self.predictor(z1)
        p2 = self.predictor(z2)

        return p1, p2, z1.detach(), z2.detach()


class AverageMeter(object):
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
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

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


class ProgressMeter(object):
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print('\t'.join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = '{:' + str(num_digits) + 'd}'
        return '[' + fmt + '/' + fmt.format(num_batches) + ']'


def adjust_learning_rate(optimizer, init_lr, epoch, args):
    """Decay the learning rate based on schedule"""
    cur_lr = init_lr * 0.5 * (1. + math.cos(math.pi * epoch / args.epochs))
    for param_group in optimizer.param_groups:
        if 'fix_lr' in param_group and param_group['fix_lr']:
            param_group['lr'] = init_lr
        else:
            param_group['lr'] = cur_lr


def train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter('Time', ':6.3f')
    losses = AverageMeter('Loss', ':.4f')
    progress = ProgressMeter(len(train_loader), [batch_time, losses], prefix="Epoch: [{}]".format(epoch))

    model.train()
    end = time.time()
    for i, (images, _) in enumerate(train_loader):
        p1, p2, z1, z2 = model(x1=images[0], x2=images[1])
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5

        losses.update(loss.item(), images[0].size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)
    with torch.no_grad():
        z_std = F.normalize(z1, dim=1).std(dim=0).mean().item()
    return losses.avg, z_std


@torch.no_grad()
def knn_monitor(backbone, memory_x, memory_y, test_x, test_y, k=20, t=0.1):
    backbone.eval()
    feats = F.normalize(backbone(memory_x), dim=1)
    test_feats = F.normalize(backbone(test_x), dim=1)
    sim = test_feats @ feats.t()
    sim_w, sim_idx = sim.topk(k, dim=1)
    sim_labels = memory_y[sim_idx]
    sim_w = (sim_w / t).exp()
    one_hot = F.one_hot(sim_labels, N_KINDS).float()
    scores = (one_hot * sim_w.unsqueeze(-1)).sum(1)
    pred = scores.argmax(1)
    backbone.train()
    return (pred == test_y).float().mean().item() * 100


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    model = SimSiam(SmallConvNet, args.dim, args.pred_dim)
    print(model)

    init_lr = args.lr * args.batch_size / 256

    criterion = nn.CosineSimilarity(dim=1)

    if args.fix_pred_lr:
        optim_params = [{'params': model.encoder.parameters(), 'fix_lr': False},
                        {'params': model.predictor.parameters(), 'fix_lr': True}]
    else:
        optim_params = model.parameters()

    optimizer = torch.optim.SGD(optim_params, init_lr, momentum=args.momentum, weight_decay=args.weight_decay)

    train_x, train_y = make_textures(1024, seed=1)
    mem_x, mem_y = make_textures(600, seed=2)
    test_x, test_y = make_textures(600, seed=3)
    train_dataset = TextureDataset(train_x, train_y, TwoCropsTransform(augment))
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)

    backbone = nn.Sequential(model.encoder.features, nn.Flatten())
    print('kNN acc before training: {:.2f}%'.format(knn_monitor(backbone, mem_x, mem_y, test_x, test_y)))

    for epoch in range(args.epochs):
        adjust_learning_rate(optimizer, init_lr, epoch, args)
        loss_avg, z_std = train(train_loader, model, criterion, optimizer, epoch, args)
        acc = knn_monitor(backbone, mem_x, mem_y, test_x, test_y)
        print('Epoch {}: lr {:.4f} (predictor {:.4f})  loss {:.4f}  z std {:.4f} (1/sqrt(dim) = {:.4f})  '
              'kNN acc {:.2f}%'.format(epoch, optimizer.param_groups[0]['lr'], optimizer.param_groups[1]['lr'],
                                       loss_avg, z_std, 1 / math.sqrt(args.dim), acc))


if __name__ == '__main__':
    main()
