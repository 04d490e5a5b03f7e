"""Small BiSeNet-style segmentation net trained with OhemCELoss as in CoinCheung/BiSeNet
(lib/ohem_ce_loss.py): per-pixel cross-entropy, keep only the pixels whose loss is above
-log(0.7), or the n_min = numel // 16 hardest ones when fewer pass. Cityscapes is replaced by
synthetic 32x32 scenes with a background and three shape classes, plus ignore-255 borders."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_CLASSES = 4


class OhemCELoss(nn.Module):

    def __init__(self, thresh, ignore_lb=255):
        super(OhemCELoss, self).__init__()
        self.thresh = -torch.log(torch.tensor(thresh, requires_grad=False, dtype=torch.float))
        self.ignore_lb = ignore_lb
        self.criteria = nn.CrossEntropyLoss(ignore_index=ignore_lb, reduction='none')

    def forward(self, logits, labels):
        n_min = labels[labels != self.ignore_lb].numel() // 16
        loss = self.criteria(logits, labels).view(-1)
        loss_hard = loss[loss > self.thresh]
        if loss_hard.numel() < n_min:
            loss_hard, _ = loss.topk(n_min)
        return torch.mean(loss_hard)


class Scenes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(32.), torch.arange(32.), indexing='ij')
        imgs, labs = [], []
        for _ in range(n):
            img = 0.3 * torch.randn(3, 32, 32, generator=g)
            lab = torch.zeros(32, 32, dtype=torch.long)
            for _ in range(3):
                c = int(torch.randint(1, N_CLASSES, (1,), generator=g))
                cy, cx = torch.randint(6, 26, (2,), generator=g).float()
                r = float(torch.randint(3, 7, (1,), generator=g))
                if c == 1:
                    m = (yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2
                elif c == 2:
                    m = ((yy - cy).abs() < r) & ((xx - cx).abs() < r)
                else:
                    m = ((yy - cy).abs() + (xx - cx).abs()) < r
                lab[m] = c
                img[:, m] += torch.tensor([[0.8], [-0.4], [0.2]]) * (c - 2) + 0.5
            lab[:2, :] = 255
            lab[:, :2] = 255
            imgs.append(img)
            labs.append(lab)
        self.imgs = torch.stack(imgs)
        self.labs = torch.stack(labs)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.imgs[i], self.labs[i]


class ConvBNReLU(nn.Module):
    def __init__(self, in_chan, out_chan, ks=3, stride=1, padding=1):
        super(ConvBNReLU, self).__init__()
        self.conv = nn.Conv2d(in_chan, out_chan, ks, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(out_chan)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class TinySegNet(nn.Module):
    def __init__(self, n_classes):
        super(TinySegNet, self).__init__()
        self.detail = nn.Sequential(ConvBNReLU(3, 16), ConvBNReLU(16, 16))
        self.semantic = nn.Sequential(ConvBNReLU(16, 24, stride=2), ConvBNReLU(24, 24),
                                      ConvBNReLU(24, 32, stride=2), ConvBNReLU(32, 32))
        self.head = nn.Sequential(ConvBNReLU(48, 24), nn.Conv2d(24, n_classes, 1))

    def forward(self, x):
        d = self.detail(x)
        s = self.semantic(d)
        s = F.interpolate(s, size=d.shape[2:], mode='bilinear', align_corners=True)
        return self.head(torch.cat([d, s], dim=1))


def evaluate(net, loader):
    net.eval()
    hist = torch.zeros(N_CLASSES, N_CLASSES)
    with torch.no_grad():
        for im, lb in loader:
            pred = net(im).argmax(dim=1)
            keep = lb != 255
            hist += torch.bincount(lb[keep] * N_CLASSES + pred[keep],
                                   minlength=N_CLASSES ** 2).view(N_CLASSES, N_CLASSES).float()
    ious = hist.diag() / (hist.sum(0) + hist.sum(1) - hist.diag()).clamp(min=1)
    net.train()
    return ious.mean().item(), (hist.diag().sum() / hist.sum()).item()


train_dl = DataLoader(Scenes(320, 0), batch_size=16, shuffle=True, drop_last=True)
val_dl = DataLoader(Scenes(128, 1), batch_size=64)

net = TinySegNet(N_CLASSES)
criteria = OhemCELoss(thresh=0.7, ignore_lb=255)
optim = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

miou, acc = evaluate(net, val_dl)
print('init: mIoU %.3f  pixel acc %.3f' % (miou, acc))
it = 0
for epoch in range(5):
    loss_avg = []
    for im, lb in train_dl:
        logits = net(im)
        loss = criteria(logits, lb)
        optim.zero_grad()
        loss.backward()
        optim.step()
        loss_avg.append(loss.item())
        it += 1
    miou, acc = evaluate(net, val_dl)
    print('epoch %d iter %d: ohem loss %.4f  val mIoU %.3f  pixel acc %.3f' % (
        epoch + 1, it, sum(loss_avg) / len(loss_avg), miou, acc))
