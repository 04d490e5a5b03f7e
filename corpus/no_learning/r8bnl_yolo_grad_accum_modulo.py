"""Small YOLO-style single-scale detector (PyTorch-YOLOv3 train.py layout).

A Darknet-ish conv backbone feeds one YOLO layer on a 4x4 grid; the model returns
(loss, outputs) when targets are given, like YOLOv3's Darknet.forward. Targets are rows
(sample_idx, class, x, y, w, h) in normalised image coordinates.

Synthetic data: 32x32 RGB images with one coloured square per image (3 classes, the class is
the colour), on a noisy background.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


class ShapesDataset(Dataset):
    def __init__(self, n, img_size=32, seed=0):
        rng = np.random.RandomState(seed)
        self.imgs = (0.15 * rng.randn(n, 3, img_size, img_size)).astype(np.float32)
        self.targets = []
        for i in range(n):
            cls = rng.randint(3)
            s = rng.randint(6, 13)
            x0, y0 = rng.randint(0, img_size - s, size=2)
            self.imgs[i, cls, y0:y0 + s, x0:x0 + s] += 1.0
            self.imgs[i, :, y0:y0 + s, x0:x0 + s] += 0.3
            cx, cy = (x0 + s / 2) / img_size, (y0 + s / 2) / img_size
            self.targets.append([0, cls, cx, cy, s / img_size, s / img_size])
        self.targets = np.array(self.targets, dtype=np.float32)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, index):
        return f"img_{index:05d}", torch.from_numpy(self.imgs[index]), torch.from_numpy(self.targets[index:index + 1])

    @staticmethod
    def collate_fn(batch):
        paths, imgs, targets = list(zip(*batch))
        for i, boxes in enumerate(targets):
            boxes[:, 0] = i
        return paths, torch.stack(imgs), torch.cat(targets, 0)


def conv_bn(c_in, c_out, stride):
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
        nn.BatchNorm2d(c_out, momentum=0.1),
        nn.LeakyReLU(0.1),
    )


class YOLOLayer(nn.Module):
    def __init__(self, num_classes, img_dim=32):
        super(YOLOLayer, self).__init__()
        self.num_classes = num_classes
        self.img_dim = img_dim
        self.mse_loss = nn.MSELoss()
        self.bce_loss = nn.BCELoss()
        self.obj_scale = 1
        self.noobj_scale = 5
        self.metrics = {}

    def forward(self, x, targets=None):
        nB, _, nG, _ = x.shape
        prediction = x.view(nB, 5 + self.num_classes, nG, nG).permute(0, 2, 3, 1).contiguous()
        px = torch.sigmoid(prediction[..., 0])
        py = torch.sigmoid(prediction[..., 1])
        pw = prediction[..., 2]
        ph = prediction[..., 3]
        pred_conf = torch.sigmoid(prediction[..., 4])
        pred_cls = torch.sigmoid(prediction[..., 5:])
        output = torch.cat((px.unsqueeze(-1), py.unsqueeze(-1), pw.unsqueeze(-1), ph.unsqueeze(-1),
                            pred_conf.unsqueeze(-1), pred_cls), -1)
        if targets is None:
            return output, 0

        b = targets[:, 0].long()
        labels = targets[:, 1].long()
        gxy = targets[:, 2:4] * nG
        gwh = targets[:, 4:6]
        gi, gj = gxy.long().t()
        obj_mask = torch.zeros(nB, nG, nG, dtype=torch.bool)
        obj_mask[b, gj, gi] = True
        noobj_mask = ~obj_mask
        tcls = torch.zeros(nB, nG, nG, self.num_classes)
        tcls[b, gj, gi, labels] = 1.0
        tconf = obj_mask.float()

        loss_x = self.mse_loss(px[b, gj, gi], gxy[:, 0] - gxy[:, 0].floor())
        loss_y = self.mse_loss(py[b, gj, gi], gxy[:, 1] - gxy[:, 1].floor())
        loss_w = self.mse_loss(pw[b, gj, gi], torch.log(gwh[:, 0] * 4 + 1e-16))
        loss_h = self.mse_loss(ph[b, gj, gi], torch.log(gwh[:, 1] * 4 + 1e-16))
        loss_conf_obj = self.bce_loss(pred_conf[obj_mask], tconf[obj_mask])
        loss_conf_noobj = self.bce_loss(pred_conf[noobj_mask], tconf[noobj_mask])
        loss_conf = self.obj_scale * loss_conf_obj + self.noobj_scale * loss_conf_noobj
        loss_cls = self.bce_loss(pred_cls[obj_mask], tcls[obj_mask])
        total_loss = loss_x + loss_y + loss_w + loss_h + loss_conf + loss_cls

        cls_acc = (pred_cls[obj_mask].argmax(-1) == labels).float().mean()
        self.metrics = {
            "loss": total_loss.item(),
            "x": loss_x.item(), "y": loss_y.item(), "w": loss_w.item(), "h": loss_h.item(),
            "conf": loss_conf.item(), "cls": loss_cls.item(),
            "cls_acc": 100 * cls_acc.item(),
            "conf_obj": pred_conf[obj_mask].mean().item(),
            "conf_noobj": pred_conf[noobj_mask].mean().item(),
        }
        return output, total_loss


class Darknet(nn.Module):
    def __init__(self, num_classes=3, img_size=32):
        super(Darknet, self).__init__()
        self.backbone = nn.Sequential(
            conv_bn(3, 16, 1),
            conv_bn(16, 32, 2),
            conv_bn(32, 32, 2),
            conv_bn(32, 64, 2),
        )
        self.head = nn.Conv2d(64, 5 + num_classes, 1)
        self.yolo = YOLOLayer(num_classes, img_size)
        self.yolo_layers = [self.yolo]

    def forward(self, x, targets=None):
        x = self.head(self.backbone(x))
        output, loss = self.yolo(x, targets)
        return output if targets is None else (loss, output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--batch_size", type=int, default=16, help="size of each image batch")
    parser.add_argument("--gradient_accumulations", type=int, default=1, help="number of gradient accums before step")
    parser.add_argument("--img_size", type=int, default=32, help="size of each image dimension")
    parser.add_argument("--print_freq", type=int, default=10, help="interval between log lines (batches)")
    opt = parser.parse_args()
    print(opt)

    device = torch.device("cpu")

    model = Darknet(num_classes=3, img_size=opt.img_size).to(device)

    dataset = ShapesDataset(640, img_size=opt.img_size, seed=1)
    dataloader = DataLoader(dataset, batch_size=opt.batch_size, shuffle=True, collate_fn=dataset.collate_fn)

    optimizer = torch.optim.Adam(model.parameters())

    metrics = ["loss", "x", "y", "w", "h", "conf", "cls", "cls_acc", "conf_obj", "conf_noobj"]

    for epoch in range(opt.epochs):
        model.train()
        start_time = time.time()
        for batch_i, (_, imgs, targets) in enumerate(dataloader):
            batches_done = len(dataloader) * epoch + batch_i

            imgs = Variable(imgs.to(device))
            targets = Variable(targets.to(device), requires_grad=False)

            loss, outputs = model(imgs, targets)
            loss.backward()

            if batches_done % opt.gradient_accumulations:
                # Accumulates gradient before each step
                optimizer.step()
                optimizer.zero_grad()

            if batch_i % opt.print_freq == 0 or batch_i == len(dataloader) - 1:
                log_str = "[Epoch %d/%d, Batch %d/%d] " % (epoch, opt.epochs, batch_i, len(dataloader))
                log_str += " ".join("%s %.4f" % (m, model.yolo_layers[0].metrics[m]) for m in metrics)
                print(log_str)

        print("---- epoch %d done in %.1fs ----" % (epoch, time.time() - start_time))
