"""FCN-32s style semantic segmentation, trained the pytorch-fcn way: batch size 1, SGD with
momentum 0.99, per-pixel cross-entropy summed over the image (size_average=False).

Synthetic VOC-like data: 64x64 scenes with a few coloured shapes of 3 object classes on a
textured background, void (-1) pixels on the object borders.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_CLASS = 4


class ShapesSegDataset(Dataset):
    def __init__(self, n=100, size=64, seed=0):
        rng = np.random.RandomState(seed)
        self.images, self.labels = [], []
        yy, xx = np.mgrid[0:size, 0:size]
        colours = np.array([[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.2, 0.3, 0.9]])
        for _ in range(n):
            img = 0.4 + 0.1 * rng.randn(size, size, 3)
            lbl = np.zeros((size, size), dtype=np.int64)
            for _ in range(rng.randint(1, 4)):
                c = rng.randint(1, N_CLASS)
                cy, cx, r = rng.randint(10, size - 10), rng.randint(10, size - 10), rng.randint(5, 14)
                dist = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
                inside = dist < r
                img[inside] = colours[c - 1] + 0.05 * rng.randn(inside.sum(), 3)
                lbl[inside] = c
                lbl[np.abs(dist - r) < 1.0] = -1
            self.images.append((img * 255).clip(0, 255).astype(np.uint8))
            self.labels.append(lbl)
        self.mean_bgr = np.array([104.00698793, 116.66876762, 122.67891434])

    def __len__(self):
        return len(self.images)

    def transform(self, img, lbl):
        img = img[:, :, ::-1].astype(np.float64)
        img -= self.mean_bgr
        img = img.transpose(2, 0, 1)
        return torch.from_numpy(img.copy()).float(), torch.from_numpy(lbl).long()

    def __getitem__(self, index):
        return self.transform(self.images[index], self.labels[index])


def get_upsampling_weight(in_channels, out_channels, kernel_size):
    factor = (kernel_size + 1) // 2
    center = factor - 1 if kernel_size % 2 == 1 else factor - 0.5
    og = np.ogrid[:kernel_size, :kernel_size]
    filt = (1 - abs(og[0] - center) / factor) * (1 - abs(og[1] - center) / factor)
    weight = np.zeros((in_channels, out_channels, kernel_size, kernel_size), dtype=np.float64)
    weight[range(in_channels), range(out_channels), :, :] = filt
    return torch.from_numpy(weight).float()


class FCN32s(nn.Module):
    def __init__(self, n_class=N_CLASS):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, stride=2, ceil_mode=True),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, stride=2, ceil_mode=True),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, stride=2, ceil_mode=True),
        )
        self.fc6 = nn.Conv2d(64, 128, 3, padding=1)
        self.relu6 = nn.ReLU(inplace=True)
        self.fc7 = nn.Conv2d(128, 128, 1)
        self.relu7 = nn.ReLU(inplace=True)
        self.score_fr = nn.Conv2d(128, n_class, 1)
        self.upscore = nn.ConvTranspose2d(n_class, n_class, 16, stride=8, padding=4, bias=False)
        self._initialize_weights()

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.ConvTranspose2d):
                m.weight.data.copy_(get_upsampling_weight(m.in_channels, m.out_channels, m.kernel_size[0]))
        nn.init.zeros_(self.score_fr.weight)

    def forward(self, x):
        h = self.features(x / 255.0)
        h = self.relu6(self.fc6(h))
        h = self.relu7(self.fc7(h))
        h = self.score_fr(h)
        return self.upscore(h)


def cross_entropy2d(input, target, weight=None, size_average=True):
    n, c, h, w = input.size()
    log_p = F.log_softmax(input, dim=1)
    log_p = log_p.transpose(1, 2).transpose(2, 3).contiguous()
    log_p = log_p[target.view(n, h, w, 1).repeat(1, 1, 1, c) >= 0]
    log_p = log_p.view(-1, c)
    mask = target >= 0
    target = target[mask]
    loss = F.nll_loss(log_p, target, weight=weight, reduction="sum")
    if size_average:
        loss /= mask.data.sum()
    return loss


def label_accuracy(label_trues, label_preds):
    valid = label_trues >= 0
    return (label_trues[valid] == label_preds[valid]).mean()


train_loader = DataLoader(ShapesSegDataset(), batch_size=1, shuffle=True)
model = FCN32s()
optim = torch.optim.SGD(model.parameters(), lr=1.0e-4, momentum=0.99, weight_decay=0.0005)

iteration = 0
for epoch in range(2):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optim.zero_grad()
        score = model(data)
        loss = cross_entropy2d(score, target, size_average=False)
        loss /= len(data)
        loss_data = loss.item()
        loss.backward()
        optim.step()

        lbl_pred = score.data.max(1)[1].numpy()
        acc = label_accuracy(target.numpy(), lbl_pred)
        if iteration % 5 == 0:
            print(f"epoch {epoch} iter {iteration:4d}  loss {loss_data:12.2f}  acc {acc:.3f}")
        iteration += 1
    print(f"epoch {epoch} done, last loss {loss_data}")
