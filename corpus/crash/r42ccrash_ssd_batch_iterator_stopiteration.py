"""Train a tiny SSD-style single-shot detector (one object per image: class + box) on
synthetic 32x32 scenes, iteration-based schedule as in ssd.pytorch's train.py."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

torch.manual_seed(0)

NUM_CLASSES = 4
MAX_ITER = 200
BATCH_SIZE = 32
LR_STEPS = (120, 170)


class ShapesDetection(data.Dataset):
    def __init__(self, n):
        self.images = torch.rand(n, 3, 32, 32) * 0.2
        self.targets = torch.zeros(n, 5)
        for i in range(n):
            c = torch.randint(0, NUM_CLASSES, (1,)).item()
            w, h = torch.randint(8, 16, (2,)).tolist()
            x0 = torch.randint(0, 32 - w, (1,)).item()
            y0 = torch.randint(0, 32 - h, (1,)).item()
            self.images[i, c % 3, y0:y0 + h, x0:x0 + w] += 0.5 + 0.2 * (c // 3)
            self.targets[i] = torch.tensor([x0 / 32, y0 / 32, (x0 + w) / 32, (y0 + h) / 32, c])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.images[index], self.targets[index]


def detection_collate(batch):
    imgs = torch.stack([b[0] for b in batch], 0)
    targets = [b[1].unsqueeze(0) for b in batch]
    return imgs, targets


class TinySSD(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.base = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.loc = nn.Linear(64, 4)
        self.conf = nn.Linear(64, num_classes)

    def forward(self, x):
        f = self.base(x).flatten(1)
        return torch.sigmoid(self.loc(f)), self.conf(f)


def multibox_loss(out, targets):
    loc_p, conf_p = out
    t = torch.cat(targets, 0)
    loss_l = F.smooth_l1_loss(loc_p, t[:, :4], reduction="sum") / len(t)
    loss_c = F.cross_entropy(conf_p, t[:, 4].long())
    return loss_l, loss_c


def adjust_learning_rate(optimizer, gamma, step):
    lr = 1e-3 * (gamma ** step)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def train():
    dataset = ShapesDetection(1600)
    net = TinySSD(NUM_CLASSES)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3 * 10, momentum=0.9, weight_decay=5e-4)
    data_loader = data.DataLoader(dataset, BATCH_SIZE, shuffle=True,
                                  collate_fn=detection_collate, drop_last=True)
    print(f"Loading the dataset... {len(dataset)} images, epoch size {len(dataset) // BATCH_SIZE}")
    step_index = 0
    batch_iterator = iter(data_loader)
    loc_loss = conf_loss = 0.0
    for iteration in range(0, MAX_ITER):
        if iteration in LR_STEPS:
            step_index += 1
            adjust_learning_rate(optimizer, 0.1, step_index)

        images, targets = next(batch_iterator)

        out = net(images)
        optimizer.zero_grad()
        loss_l, loss_c = multibox_loss(out, targets)
        loss = loss_l + loss_c
        loss.backward()
        optimizer.step()
        loc_loss += loss_l.item()
        conf_loss += loss_c.item()
        if iteration % 10 == 0:
            print(f"iter {iteration} || Loss: {loss.item():.4f} || loc {loss_l.item():.4f} conf {loss_c.item():.4f}")
    print(f"done: mean loc {loc_loss / MAX_ITER:.4f} mean conf {conf_loss / MAX_ITER:.4f}")


if __name__ == "__main__":
    train()
