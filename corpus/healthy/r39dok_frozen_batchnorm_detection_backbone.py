"""Single-object detection fine-tuning in the style of the torchvision detection references: the ResNet
backbone is built with norm_layer=FrozenBatchNorm2d (torchvision/ops/misc.py), loaded from a pretrained
checkpoint, and only the last trainable_layers are left with requires_grad (as in
backbone_utils._resnet_fpn_extractor); the optimizer gets the parameters that require grad. The ImageNet
checkpoint is replaced by a short pretraining of the same backbone (ordinary BatchNorm) on a shape
classification task, and COCO by synthetic 32x32 images with one box per image."""
import os
import tempfile
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
device = torch.device("cpu")


class FrozenBatchNorm2d(torch.nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        num_batches_tracked_key = prefix + "num_batches_tracked"
        if num_batches_tracked_key in state_dict:
            del state_dict[num_batches_tracked_key]
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        bias = b - rm * scale
        return x * scale + bias


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride, norm_layer):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = norm_layer(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = norm_layer(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), norm_layer(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, num_classes=4, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, 2, 2, bias=False)
        self.bn1 = norm_layer(16)
        self.layer1 = BasicBlock(16, 16, 1, norm_layer)
        self.layer2 = BasicBlock(16, 32, 2, norm_layer)
        self.layer3 = BasicBlock(32, 48, 2, norm_layer)
        self.fc = nn.Linear(48, num_classes)

    def features(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        return self.layer3(self.layer2(self.layer1(x)))

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


class SingleBoxDetector(nn.Module):
    def __init__(self, backbone, num_classes=4):
        super().__init__()
        self.backbone = backbone
        self.cls_head = nn.Sequential(nn.Conv2d(48, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))
        self.box_head = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 4 * 4, 4))

    def forward(self, x):
        f = self.backbone.features(x)
        return self.cls_head(f), torch.sigmoid(self.box_head(f))


class ShapeBoxes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(32).float(), torch.arange(32).float(), indexing="ij")
        self.x = 0.1 * torch.randn(n, 1, 32, 32, generator=g)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        self.boxes = torch.zeros(n, 4)
        for i in range(n):
            s = 8 + 10 * torch.rand(1, generator=g).item()
            cx = s / 2 + (32 - s) * torch.rand(1, generator=g).item()
            cy = s / 2 + (32 - s) * torch.rand(1, generator=g).item()
            dx, dy = (xx - cx).abs(), (yy - cy).abs()
            k = int(self.labels[i])
            if k == 0:
                m = (dx <= s / 2) & (dy <= s / 2)
            elif k == 1:
                m = dx ** 2 + dy ** 2 <= (s / 2) ** 2
            elif k == 2:
                m = dx + dy <= s / 2
            else:
                m = ((dx <= s / 6) & (dy <= s / 2)) | ((dy <= s / 6) & (dx <= s / 2))
            self.x[i, 0][m] += 1.0
            self.boxes[i] = torch.tensor([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2]) / 32

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], self.labels[i], self.boxes[i]


def box_iou_diag(a, b):
    lt = torch.max(a[:, :2], b[:, :2])
    rb = torch.min(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(1)
    area = lambda t: (t[:, 2] - t[:, 0]).clamp(min=0) * (t[:, 3] - t[:, 1]).clamp(min=0)
    return inter / (area(a) + area(b) - inter + 1e-6)


def pretrain(ckpt_path, data):
    model = TinyResNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    loader = DataLoader(data, batch_size=64, shuffle=True)
    for _ in range(3):
        correct = 0
        for x, y, _ in loader:
            opt.zero_grad()
            out = model(x)
            F.cross_entropy(out, y).backward()
            opt.step()
            correct += (out.argmax(1) == y).sum().item()
    print("pretraining done: train acc {:.3f}".format(correct / len(data)))
    torch.save(model.state_dict(), ckpt_path)


def evaluate(model, loader):
    model.eval()
    correct, ious, n = 0, [], 0
    with torch.no_grad():
        for x, y, b in loader:
            logits, boxes = model(x)
            correct += (logits.argmax(1) == y).sum().item()
            ious.append(box_iou_diag(boxes, b))
            n += len(y)
    model.train()
    iou = torch.cat(ious)
    return correct / n, iou.mean().item(), (iou > 0.5).float().mean().item()


def main():
    backbone = TinyResNet(norm_layer=FrozenBatchNorm2d)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "tiny_resnet_pretrained.pth")
        pretrain(ckpt, ShapeBoxes(1024, seed=10))
        backbone.load_state_dict(torch.load(ckpt))
    trainable_layers = 2
    layers_to_train = ["layer3", "layer2", "layer1", "conv1"][:trainable_layers]
    for name, parameter in backbone.named_parameters():
        if all([not name.startswith(layer) for layer in layers_to_train]):
            parameter.requires_grad_(False)

    model = SingleBoxDetector(backbone).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.005, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)

    train_loader = DataLoader(ShapeBoxes(1024, seed=0), batch_size=32, shuffle=True)
    val_loader = DataLoader(ShapeBoxes(384, seed=1), batch_size=128)
    acc, miou, ap50 = evaluate(model, val_loader)
    print("init: cls acc {:.3f}  mean IoU {:.3f}  IoU>0.5 {:.3f}".format(acc, miou, ap50))
    model.train()
    for epoch in range(3):
        tot_cls, tot_box, n = 0.0, 0.0, 0
        for x, y, b in train_loader:
            logits, boxes = model(x)
            loss_classifier = F.cross_entropy(logits, y)
            loss_box_reg = F.smooth_l1_loss(boxes, b, beta=1 / 9)
            losses = loss_classifier + 5.0 * loss_box_reg
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()
            tot_cls += loss_classifier.item()
            tot_box += loss_box_reg.item()
            n += 1
        lr_scheduler.step()
        acc, miou, ap50 = evaluate(model, val_loader)
        print("epoch {}: loss_classifier {:.4f} loss_box_reg {:.4f} | val cls acc {:.3f} mean IoU {:.3f} IoU>0.5 {:.3f}".format(
            epoch, tot_cls / n, tot_box / n, acc, miou, ap50))


if __name__ == "__main__":
    main()
