"""Semantic segmentation training after torchvision's references/segmentation/train.py, shrunk to a
small FCN with an auxiliary head on synthetic VOC-like images (object boundaries labelled 255 as in
the VOC masks): cross_entropy(ignore_index=255) on 'out' + 0.5 * 'aux', the aux head at 10x lr,
SGD with a per-iteration polynomial LambdaLR, and a confusion-matrix mIoU evaluation."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
NUM_CLASSES = 4


class ShapesSegmentation(Dataset):
    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images, self.masks = [], []
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        for _ in range(n):
            img = 0.3 * torch.randn(3, size, size, generator=g)
            mask = torch.zeros(size, size, dtype=torch.long)
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                cls = int(torch.randint(1, NUM_CLASSES, (1,), generator=g))
                cy, cx = torch.randint(6, size - 6, (2,), generator=g).tolist()
                r = int(torch.randint(4, 9, (1,), generator=g))
                if cls == 1:
                    region = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
                elif cls == 2:
                    region = ((yy - cy).abs() <= r) & ((xx - cx).abs() <= r)
                else:
                    region = (yy - cy).abs() + (xx - cx).abs() <= r
                mask[region] = cls
                img[:, region] += torch.tensor([[0.9], [0.0], [-0.9]]).roll(cls, 0) * 0.8
            inner = -F.max_pool2d(-(mask > 0).float()[None, None], 3, 1, 1)[0, 0]
            outer = F.max_pool2d((mask > 0).float()[None, None], 3, 1, 1)[0, 0]
            mask[(outer - inner) > 0] = 255
            self.images.append(img)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img, mask = self.images[idx], self.masks[idx]
        if torch.rand(1) < 0.5:
            img, mask = img.flip(-1), mask.flip(-1)
        return img, mask


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class FCN(nn.Module):
    def __init__(self, num_classes, aux_loss=True):
        super().__init__()
        self.backbone = nn.ModuleDict({
            "layer1": nn.Sequential(conv_bn(3, 16), conv_bn(16, 32, 2)),
            "layer2": nn.Sequential(conv_bn(32, 32), conv_bn(32, 48, 2)),
            "layer3": nn.Sequential(conv_bn(48, 48), conv_bn(48, 64)),
        })
        self.classifier = nn.Sequential(conv_bn(64, 32), nn.Dropout(0.1), nn.Conv2d(32, num_classes, 1))
        self.aux_classifier = nn.Sequential(conv_bn(48, 16), nn.Dropout(0.1), nn.Conv2d(16, num_classes, 1)) if aux_loss else None

    def forward(self, x):
        input_shape = x.shape[-2:]
        x = self.backbone["layer1"](x)
        aux_feat = self.backbone["layer2"](x)
        feat = self.backbone["layer3"](aux_feat)
        result = {"out": F.interpolate(self.classifier(feat), size=input_shape, mode="bilinear", align_corners=False)}
        if self.aux_classifier is not None:
            result["aux"] = F.interpolate(self.aux_classifier(aux_feat), size=input_shape, mode="bilinear", align_corners=False)
        return result


def criterion(inputs, target):
    losses = {}
    for name, x in inputs.items():
        losses[name] = nn.functional.cross_entropy(x, target, ignore_index=255)
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


class ConfusionMatrix:
    def __init__(self, num_classes):
        self.num_classes = num_classes
        self.mat = torch.zeros((num_classes, num_classes), dtype=torch.int64)

    def update(self, a, b):
        n = self.num_classes
        k = (a >= 0) & (a < n)
        inds = n * a[k] + b[k]
        self.mat += torch.bincount(inds, minlength=n ** 2).reshape(n, n)

    def compute(self):
        h = self.mat.float()
        acc_global = torch.diag(h).sum() / h.sum()
        iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
        return acc_global.item(), iu.mean().item()


def evaluate(model, data_loader, num_classes):
    model.eval()
    confmat = ConfusionMatrix(num_classes)
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image)["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
    return confmat.compute()


def train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch):
    model.train()
    total = 0.0
    for image, target in data_loader:
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        total += loss.item()
    print(f"Epoch [{epoch}] loss {total / len(data_loader):.4f} lr {optimizer.param_groups[0]['lr']:.5f}")


def main():
    epochs, lr, batch_size = 5, 0.02, 16
    dataset = ShapesSegmentation(384, seed=1)
    dataset_test = ShapesSegmentation(96, seed=2)
    data_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
    data_loader_test = DataLoader(dataset_test, batch_size=32)
    model = FCN(NUM_CLASSES, aux_loss=True)
    params_to_optimize = [
        {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
    ]
    params = [p for p in model.aux_classifier.parameters() if p.requires_grad]
    params_to_optimize.append({"params": params, "lr": lr * 10})
    optimizer = torch.optim.SGD(params_to_optimize, lr=lr, momentum=0.9, weight_decay=1e-4)
    iters_per_epoch = len(data_loader)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda x: (1 - x / (iters_per_epoch * epochs)) ** 0.9)
    acc, miou = evaluate(model, data_loader_test, NUM_CLASSES)
    print(f"init: global acc {acc:.3f} mean IoU {miou:.3f}")
    for epoch in range(epochs):
        train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch)
        acc, miou = evaluate(model, data_loader_test, NUM_CLASSES)
        print(f"Test: global acc {acc:.3f} mean IoU {miou:.3f}")


if __name__ == "__main__":
    main()
