"""One-stage (YOLO-style) object detector on a toy dataset, darknet-style training config.

Each 32x32 image holds 1-3 bright squares on a noisy background. The detector predicts, for every
cell of a 4x4 grid, an objectness logit and a box (x, y offsets in the cell, w, h relative to
the image). Loss: BCE on objectness for all cells + MSE on the box for the cells that hold an
object centre.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

IMG = 32
GRID = 4
CELL = IMG // GRID

# darknet-style hyper-parameters
learning_rate = 0.001
momentum = 0.9
decay = 0.0005
batch = 64
max_epochs = 6


class SquaresDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = 0.2 * torch.randn(n, 1, IMG, IMG, generator=g)
        self.targets = torch.zeros(n, 5, GRID, GRID)
        for i in range(n):
            k = int(torch.randint(1, 4, (1,), generator=g))
            for _ in range(k):
                size = int(torch.randint(5, 11, (1,), generator=g))
                x0 = int(torch.randint(0, IMG - size, (1,), generator=g))
                y0 = int(torch.randint(0, IMG - size, (1,), generator=g))
                self.images[i, 0, y0:y0 + size, x0:x0 + size] += 1.0
                cx, cy = x0 + size / 2, y0 + size / 2
                gx, gy = int(cx // CELL), int(cy // CELL)
                self.targets[i, :, gy, gx] = torch.tensor(
                    [1.0, cx / CELL - gx, cy / CELL - gy, size / IMG, size / IMG])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.targets[i]


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.LeakyReLU(0.1))


class TinyYolo(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            conv_bn(1, 8), nn.MaxPool2d(2),
            conv_bn(8, 16), nn.MaxPool2d(2),
            conv_bn(16, 32), nn.MaxPool2d(2),
            conv_bn(32, 32),
        )
        self.head = nn.Conv2d(32, 5, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


class RegionLoss(nn.Module):
    def forward(self, output, target):
        obj = target[:, 0]
        obj_loss = F.binary_cross_entropy_with_logits(output[:, 0], obj)
        pos = obj > 0.5
        pred_box = torch.sigmoid(output[:, 1:]).permute(0, 2, 3, 1)[pos]
        true_box = target[:, 1:].permute(0, 2, 3, 1)[pos]
        box_loss = F.mse_loss(pred_box, true_box)
        return obj_loss + 5.0 * box_loss, obj_loss, box_loss


def evaluate(net, loader):
    net.eval()
    tp = fp = n_obj = 0
    with torch.no_grad():
        for images, targets in loader:
            out = net(images)
            pred = torch.sigmoid(out[:, 0]) > 0.5
            gt = targets[:, 0] > 0.5
            tp += (pred & gt).sum().item()
            fp += (pred & ~gt).sum().item()
            n_obj += gt.sum().item()
    return tp / max(tp + fp, 1), tp / n_obj


def main():
    train_loader = DataLoader(SquaresDataset(1536, seed=0), batch_size=batch, shuffle=True)
    val_loader = DataLoader(SquaresDataset(512, seed=1), batch_size=128)

    net = TinyYolo()
    criterion = RegionLoss()
    optim = torch.optim.SGD(net.parameters(), lr=learning_rate / batch, momentum=momentum,
                            dampening=0, weight_decay=decay * batch)

    for epoch in range(max_epochs):
        net.train()
        tot = tot_obj = tot_box = 0.0
        for i, (images, targets) in enumerate(train_loader):
            output = net(images)
            loss, obj_loss, box_loss = criterion(output, targets)
            optim.zero_grad()
            loss.backward()
            optim.step()
            tot += loss.item()
            tot_obj += obj_loss.item()
            tot_box += box_loss.item()
        n = len(train_loader)
        precision, recall = evaluate(net, val_loader)
        print(f"epoch {epoch}: loss {tot / n:.4f} (obj {tot_obj / n:.4f}, box {tot_box / n:.4f})  "
              f"val precision {precision:.3f} recall {recall:.3f}")


if __name__ == "__main__":
    main()
