"""Binary building segmentation on small remote-sensing tiles.

Loss = cross entropy (ignore_index=255 for the unlabelled border pixels) + boundary loss
(BF1 between predicted and ground-truth boundaries, Bokhorst et al. style).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_CLASSES = 2
IGNORE = 255


def one_hot(label, n_classes, requires_grad=True):
    device = label.device
    one_hot_label = torch.eye(n_classes, device=device, requires_grad=requires_grad)[label]
    one_hot_label = one_hot_label.transpose(1, 3).transpose(2, 3)
    return one_hot_label


class BoundaryLoss(nn.Module):
    def __init__(self, theta0=3, theta=5):
        super().__init__()
        self.theta0 = theta0
        self.theta = theta

    def forward(self, pred, gt):
        n, c, _, _ = pred.shape
        pred = torch.softmax(pred, dim=1)
        one_hot_gt = one_hot(gt, c)

        gt_b = F.max_pool2d(1 - one_hot_gt, kernel_size=self.theta0, stride=1,
                            padding=(self.theta0 - 1) // 2)
        gt_b -= 1 - one_hot_gt
        pred_b = F.max_pool2d(1 - pred, kernel_size=self.theta0, stride=1,
                              padding=(self.theta0 - 1) // 2)
        pred_b -= 1 - pred

        gt_b_ext = F.max_pool2d(gt_b, kernel_size=self.theta, stride=1,
                                padding=(self.theta - 1) // 2)
        pred_b_ext = F.max_pool2d(pred_b, kernel_size=self.theta, stride=1,
                                  padding=(self.theta - 1) // 2)

        gt_b = gt_b.view(n, c, -1)
        pred_b = pred_b.view(n, c, -1)
        gt_b_ext = gt_b_ext.view(n, c, -1)
        pred_b_ext = pred_b_ext.view(n, c, -1)

        P = torch.sum(pred_b * gt_b_ext, dim=2) / (torch.sum(pred_b, dim=2) + 1e-7)
        R = torch.sum(pred_b_ext * gt_b, dim=2) / (torch.sum(gt_b, dim=2) + 1e-7)
        BF1 = 2 * P * R / (P + R + 1e-7)
        return torch.mean(1 - BF1)


class BuildingTiles(Dataset):
    """Synthetic 32x32 RGB tiles with one or two bright rectangular roofs."""

    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = []
        self.masks = []
        for i in range(n):
            img = 0.3 * torch.rand(3, size, size, generator=g)
            mask = torch.zeros(size, size, dtype=torch.long)
            for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
                h, w = torch.randint(6, 14, (2,), generator=g).tolist()
                y, x = torch.randint(0, size - 14, (2,), generator=g).tolist()
                img[:, y:y + h, x:x + w] += torch.tensor([0.5, 0.4, 0.3]).view(3, 1, 1)
                mask[y:y + h, x:x + w] = 1
            if torch.rand(1, generator=g).item() < 0.06:
                # annotators left a one-pixel unlabelled band around each roof
                edge = F.max_pool2d(mask[None, None].float(), 3, 1, 1)[0, 0].long() - mask
                mask[edge == 1] = IGNORE
            self.images.append(img.clamp(0, 1))
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.masks[idx]


class SmallSegNet(nn.Module):
    def __init__(self, n_classes=N_CLASSES):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                                  nn.BatchNorm2d(32), nn.ReLU())
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        d = self.dec(torch.cat([self.up(e2), e1], dim=1))
        return self.head(d)


def iou(logits, masks):
    pred = logits.argmax(1)
    valid = masks != IGNORE
    inter = ((pred == 1) & (masks == 1) & valid).sum().item()
    union = (((pred == 1) | (masks == 1)) & valid).sum().item()
    return inter / max(union, 1)


def main():
    train_loader = DataLoader(BuildingTiles(256, seed=1), batch_size=16, shuffle=True)
    val_loader = DataLoader(BuildingTiles(96, seed=2), batch_size=32)

    model = SmallSegNet()
    ce = nn.CrossEntropyLoss(ignore_index=IGNORE)
    boundary = BoundaryLoss(theta0=3, theta=5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    step = 0
    for epoch in range(4):
        model.train()
        running = 0.0
        for images, masks in train_loader:
            optimizer.zero_grad()
            logits = model(images)
            loss = ce(logits, masks) + 0.5 * boundary(logits, masks)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"step {step} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            scores = [iou(model(x), y) for x, y in val_loader]
        print(f"epoch {epoch + 1} train loss {running / len(train_loader):.4f} "
              f"val IoU {sum(scores) / len(scores):.3f}")


if __name__ == "__main__":
    main()
