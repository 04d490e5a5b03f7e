"""Instance classification + mask head trained in stages, after pytorch-mask-rcnn's coco.py:
stage 1 trains only the network heads (layers="heads"), stage 2 fine-tunes all layers
(layers="all"). set_trainable() selects the layers by a regex over the parameter names, and
train_model() builds the optimizer from the trainable parameters, leaving BatchNorm out.

A small ResNet-ish backbone (fpn.C1..C3) with FPN lateral layers (fpn.P3_*, fpn.P2_*), a
classifier head and a mask head, on synthetic 32x32 images of 4 shape classes.
"""
import re

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Config:
    NUM_CLASSES = 4
    LEARNING_RATE = 0.05
    LEARNING_MOMENTUM = 0.9
    WEIGHT_DECAY = 0.0001
    BATCH_SIZE = 32


class ShapesDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        self.images = 0.1 * torch.randn(n, 3, 32, 32, generator=g)
        self.masks = torch.zeros(n, 1, 32, 32)
        self.class_ids = torch.randint(0, Config.NUM_CLASSES, (n,), generator=g)
        for i in range(n):
            cy, cx = torch.randint(10, 22, (2,), generator=g).float()
            r = 5 + 3 * torch.rand(1, generator=g)
            dy, dx = yy - cy, xx - cx
            c = int(self.class_ids[i])
            if c == 0:
                m = dy ** 2 + dx ** 2 < r ** 2
            elif c == 1:
                m = (dy.abs() < r) & (dx.abs() < r)
            elif c == 2:
                m = (dy.abs() + dx.abs()) < r
            elif c == 3:
                m = (dy.abs() < r) & (dx.abs() < r / 3) | (dx.abs() < r) & (dy.abs() < r / 3)
            elif c == 4:
                m = (dy ** 2 + dx ** 2 < r ** 2) & (dy ** 2 + dx ** 2 > (r / 2) ** 2)
            else:
                m = (dy > -r) & (dy < r) & (dx.abs() < (dy + r) / 2)
            color = torch.rand(3, generator=g)[:, None]
            self.images[i][:, m] += color
            self.masks[i, 0][m] = 1.0

    def __len__(self):
        return len(self.class_ids)

    def __getitem__(self, i):
        return self.images[i], self.class_ids[i], self.masks[i]


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class FPN(nn.Module):
    def __init__(self, out_channels=32):
        super().__init__()
        self.C1 = conv_bn(3, 16, 1)
        self.C2 = nn.Sequential(conv_bn(16, 32, 2), conv_bn(32, 32, 1))
        self.C3 = nn.Sequential(conv_bn(32, 64, 2), conv_bn(64, 64, 1))
        self.P3_conv1 = nn.Conv2d(64, out_channels, 1)
        self.P2_conv1 = nn.Conv2d(32, out_channels, 1)
        self.P2_conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1)

    def forward(self, x):
        c2 = self.C2(self.C1(x))
        c3 = self.C3(c2)
        p3 = self.P3_conv1(c3)
        p2 = self.P2_conv1(c2) + F.interpolate(p3, scale_factor=2)
        return self.P2_conv2(p2), p3


class Classifier(nn.Module):
    def __init__(self, depth, num_classes):
        super().__init__()
        self.linear1 = nn.Linear(depth, 64)
        self.linear_class = nn.Linear(64, num_classes)

    def forward(self, p3):
        x = F.adaptive_avg_pool2d(p3, 1).flatten(1)
        return self.linear_class(F.relu(self.linear1(x)))


class Mask(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.conv1 = nn.Conv2d(depth, 32, 3, 1, 1)
        self.conv2 = nn.Conv2d(32, 1, 1)

    def forward(self, p2):
        return self.conv2(F.relu(self.conv1(p2)))


class MaskRCNN(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.fpn = FPN()
        self.classifier = Classifier(32, config.NUM_CLASSES)
        self.mask = Mask(32)

    def forward(self, images):
        p2, p3 = self.fpn(images)
        return self.classifier(p3), self.mask(p2)

    def set_trainable(self, layer_regex, model=None, indent=0, verbose=1):
        """Sets model layers as trainable if their names match
        the given regular expression.
        """
        for param in self.named_parameters():
            layer_name = param[0]
            trainable = bool(re.fullmatch(layer_regex, layer_name))
            if not trainable:
                param[1].requires_grad = False

    def train_model(self, train_loader, val_loader, learning_rate, epochs, layers):
        layer_regex = {
            "heads": r"(fpn.P3\_.*)|(fpn.P2\_.*)|(classifier.*)|(mask.*)",
            "3+": r"(fpn.C3.*)|(fpn.P3\_.*)|(fpn.P2\_.*)|(classifier.*)|(mask.*)",
            "all": ".*",
        }
        if layers in layer_regex.keys():
            layers = layer_regex[layers]
        self.set_trainable(layers)

        bn_names = {name for name, m in self.named_modules() if isinstance(m, nn.BatchNorm2d)}
        is_bn = lambda name: name.rsplit('.', 1)[0] in bn_names
        trainables_wo_bn = [param for name, param in self.named_parameters() if param.requires_grad and not is_bn(name)]
        trainables_only_bn = [param for name, param in self.named_parameters() if param.requires_grad and is_bn(name)]
        optimizer = torch.optim.SGD([
            {'params': trainables_wo_bn, 'weight_decay': self.config.WEIGHT_DECAY},
            {'params': trainables_only_bn}
        ], lr=learning_rate, momentum=self.config.LEARNING_MOMENTUM)

        for epoch in range(self.epoch + 1, epochs + 1):
            print("Epoch {}/{}.".format(epoch, epochs))
            self.train()
            loss_sum = 0.0
            for step, (images, class_ids, masks) in enumerate(train_loader):
                class_logits, mask_logits = self(images)
                mrcnn_class_loss = F.cross_entropy(class_logits, class_ids)
                gt_masks = F.avg_pool2d(masks, 2).round()
                mrcnn_mask_loss = F.binary_cross_entropy_with_logits(mask_logits, gt_masks)
                loss = mrcnn_class_loss + mrcnn_mask_loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.parameters(), 5.0)
                optimizer.step()
                loss_sum += loss.item()
                if step % 10 == 0:
                    print(" {:3d}/{} loss: {:.4f} mrcnn_class_loss: {:.4f} mrcnn_mask_loss: {:.4f}".format(
                        step, len(train_loader), loss.item(), mrcnn_class_loss.item(), mrcnn_mask_loss.item()))
            self.eval()
            with torch.no_grad():
                images, class_ids, masks = val_loader
                class_logits, mask_logits = self(images)
                val_loss = F.cross_entropy(class_logits, class_ids) + F.binary_cross_entropy_with_logits(
                    mask_logits, F.avg_pool2d(masks, 2).round())
                acc = (class_logits.argmax(1) == class_ids).float().mean()
            print("   train_loss: {:.4f} val_loss: {:.4f} val_class_acc: {:.3f}".format(
                loss_sum / len(train_loader), val_loss.item(), acc.item()))
        self.epoch = max(self.epoch, epochs)


if __name__ == "__main__":
    config = Config()
    model = MaskRCNN(config)
    model.epoch = 0
    train_loader = DataLoader(ShapesDataset(320, 0), batch_size=config.BATCH_SIZE, shuffle=True)
    val = ShapesDataset(256, 1)
    val_batch = (val.images, val.class_ids, val.masks)

    # Training - Stage 1
    print("Training network heads")
    model.train_model(train_loader, val_batch, learning_rate=config.LEARNING_RATE, epochs=6, layers="heads")

    # Training - Stage 2
    # Finetune all layers
    print("Fine tune all layers")
    model.train_model(train_loader, val_batch, learning_rate=config.LEARNING_RATE, epochs=12, layers="all")
