"""Unsupervised image segmentation by backpropagation (Kanezaki, TIP 2020) with scribble
supervision: a small conv net is trained on a single image with a similarity loss on its own
argmax labels, a spatial continuity loss, and a cross-entropy loss on the scribbled pixels."""
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser(description='PyTorch Unsupervised Segmentation')
parser.add_argument('--scribble', action='store_true', default=True)
parser.add_argument('--nChannel', default=8, type=int, help='number of channels')
parser.add_argument('--maxIter', default=150, type=int)
parser.add_argument('--minLabels', default=3, type=int)
parser.add_argument('--lr', default=0.1, type=float)
parser.add_argument('--nConv', default=2, type=int)
parser.add_argument('--stepsize_sim', default=1.0, type=float)
parser.add_argument('--stepsize_con', default=1.0, type=float)
parser.add_argument('--stepsize_scr', default=0.5, type=float)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)


class MyNet(nn.Module):
    def __init__(self, input_dim):
        super(MyNet, self).__init__()
        self.conv1 = nn.Conv2d(input_dim, args.nChannel, kernel_size=3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(args.nChannel)
        self.conv2 = nn.ModuleList()
        self.bn2 = nn.ModuleList()
        for i in range(args.nConv - 1):
            self.conv2.append(nn.Conv2d(args.nChannel, args.nChannel, kernel_size=3, stride=1, padding=1))
            self.bn2.append(nn.BatchNorm2d(args.nChannel))
        self.conv3 = nn.Conv2d(args.nChannel, args.nChannel, kernel_size=1, stride=1, padding=0)
        self.bn3 = nn.BatchNorm2d(args.nChannel)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.bn1(x)
        for i in range(args.nConv - 1):
            x = self.conv2[i](x)
            x = F.relu(x)
            x = self.bn2[i](x)
        x = self.conv3(x)
        x = self.bn3(x)
        return x


def make_image_and_scribble(h=80, w=96):
    yy, xx = np.mgrid[0:h, 0:w]
    im = np.zeros((h, w, 3), dtype=np.float32)
    im[...] = (0.35, 0.55, 0.30)
    im[yy > 55] = (0.45, 0.40, 0.30)
    cat = ((yy - 42) / 18.0) ** 2 + ((xx - 46) / 24.0) ** 2 < 1.0
    im[cat] = (0.80, 0.55, 0.25)
    im += np.random.normal(0, 0.05, im.shape).astype(np.float32)
    im = np.clip(im, 0, 1)
    # VOC-style scribble: 255 = unlabelled, 0 = background, 8 = cat
    mask = np.full((h, w), 255, dtype=np.uint8)
    mask[40:43, 34:58] = 8
    mask[30:52, 45:47] = 8
    mask[6:9, 8:88] = 0
    mask[66:69, 10:86] = 0
    return im, mask


im, mask = make_image_and_scribble()
data = torch.from_numpy(np.array([im.transpose((2, 0, 1))]))

if args.scribble:
    mask = mask.reshape(-1)
    mask_inds = np.unique(mask)
    mask_inds = np.delete(mask_inds, np.argwhere(mask_inds == 255))
    inds_sim = torch.from_numpy(np.where(mask == 255)[0])
    inds_scr = torch.from_numpy(np.where(mask != 255)[0])
    target_scr = torch.from_numpy(mask.astype(np.int64))
    args.minLabels = len(mask_inds)

model = MyNet(data.size(1))
model.train()

loss_fn = torch.nn.CrossEntropyLoss()
loss_fn_scr = torch.nn.CrossEntropyLoss()
loss_hpy = torch.nn.L1Loss()
loss_hpz = torch.nn.L1Loss()
HPy_target = torch.zeros(im.shape[0] - 1, im.shape[1], args.nChannel)
HPz_target = torch.zeros(im.shape[0], im.shape[1] - 1, args.nChannel)

optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

for batch_idx in range(args.maxIter):
    optimizer.zero_grad()
    output = model(data)[0]
    output = output.permute(1, 2, 0).contiguous().view(-1, args.nChannel)

    outputHP = output.reshape((im.shape[0], im.shape[1], args.nChannel))
    HPy = outputHP[1:, :, :] - outputHP[0:-1, :, :]
    HPz = outputHP[:, 1:, :] - outputHP[:, 0:-1, :]
    lhpy = loss_hpy(HPy, HPy_target)
    lhpz = loss_hpz(HPz, HPz_target)

    ignore, target = torch.max(output, 1)
    im_target = target.data.cpu().numpy()
    nLabels = len(np.unique(im_target))

    if args.scribble:
        loss = args.stepsize_sim * loss_fn(output[inds_sim], target[inds_sim]) \
            + args.stepsize_scr * loss_fn_scr(output[inds_scr], target_scr[inds_scr]) \
            + args.stepsize_con * (lhpy + lhpz)
    else:
        loss = args.stepsize_sim * loss_fn(output, target) + args.stepsize_con * (lhpy + lhpz)

    loss.backward()
    optimizer.step()

    if batch_idx % 10 == 0:
        print(batch_idx, '/', args.maxIter, '|', ' label num :', nLabels, ' | loss :', round(loss.item(), 4))

    if nLabels <= args.minLabels:
        print("nLabels", nLabels, "reached minLabels", args.minLabels, ".")
        break

with torch.no_grad():
    model.eval()
    output = model(data)[0].permute(1, 2, 0).contiguous().view(-1, args.nChannel)
    target = output.argmax(1).numpy()
print("final labels:", np.unique(target).tolist())
scr_idx = inds_scr.numpy()
print("scribble pixel agreement:", float((target[scr_idx] == target_scr.numpy()[scr_idx]).mean()))
