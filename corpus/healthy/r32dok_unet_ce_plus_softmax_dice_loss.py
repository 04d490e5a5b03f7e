"""Multiclass UNet segmentation, trained the way milesial/Pytorch-UNet's train.py does it:
cross-entropy on the logits plus a soft Dice loss on the softmax probabilities against one-hot masks,
RMSprop with momentum, gradient clipping, ReduceLROnPlateau on the validation Dice score.

Synthetic data: 3-channel 32x32 noisy images with a disc (class 1) and a square (class 2) on background.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import Dataset, DataLoader, random_split

torch.manual_seed(0)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    assert input.size() == target.size()
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target, multiclass=False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


class ShapesDataset(Dataset):
    def __init__(self, n, size=32):
        g = torch.Generator().manual_seed(1)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        self.images = torch.empty(n, 3, size, size)
        self.masks = torch.zeros(n, size, size, dtype=torch.long)
        for i in range(n):
            cx, cy = torch.randint(6, size - 6, (2,), generator=g).tolist()
            r = torch.randint(3, 7, (1,), generator=g).item()
            disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
            sx, sy = torch.randint(2, size - 9, (2,), generator=g).tolist()
            s = torch.randint(4, 8, (1,), generator=g).item()
            square = (xx >= sx) & (xx < sx + s) & (yy >= sy) & (yy < sy + s)
            mask = torch.zeros(size, size, dtype=torch.long)
            mask[disc] = 1
            mask[square] = 2
            img = 0.3 * torch.randn(3, size, size, generator=g)
            img[0] += 0.8 * (mask > 0).float()
            img[1] += 0.8 * (mask == 1).float()
            img[2] += 0.8 * (mask == 2).float() - 0.4 * (mask == 1).float()
            self.images[i] = img
            self.masks[i] = mask

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": self.images[idx], "mask": self.masks[idx]}


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.inc = DoubleConv(n_channels, 8)
        self.down1 = Down(8, 16)
        self.down2 = Down(16, 16)
        self.up1 = Up(32, 8)
        self.up2 = Up(16, 8)
        self.outc = nn.Conv2d(8, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


@torch.inference_mode()
def evaluate(net, dataloader):
    net.eval()
    dice_score = 0
    for batch in dataloader:
        image, mask_true = batch["image"], batch["mask"]
        mask_pred = net(image)
        mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
        mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
        dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
    net.train()
    return dice_score / max(len(dataloader), 1)


def train_model(model, epochs=10, batch_size=16, learning_rate=2e-3, val_percent=0.2,
                weight_decay=1e-8, momentum=0.9, gradient_clipping=1.0, amp=False):
    dataset = ShapesDataset(320)
    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, shuffle=True, batch_size=batch_size)
    val_loader = DataLoader(val_set, shuffle=False, drop_last=True, batch_size=batch_size)

    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=weight_decay,
                              momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=5)
    grad_scaler = torch.amp.GradScaler("cpu", enabled=amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0

    print(f"initial validation Dice {evaluate(model, val_loader):.3f}")
    for epoch in range(1, epochs + 1):
        model.train()
        epoch_loss = 0
        for batch in train_loader:
            images, true_masks = batch["image"], batch["mask"]
            assert images.shape[1] == model.n_channels

            with torch.autocast("cpu", enabled=amp):
                masks_pred = model(images)
                if model.n_classes == 1:
                    loss = criterion(masks_pred.squeeze(1), true_masks.float())
                    loss += dice_loss(F.sigmoid(masks_pred.squeeze(1)), true_masks.float(), multiclass=False)
                else:
                    loss = criterion(masks_pred, true_masks)
                    loss += dice_loss(
                        F.softmax(masks_pred, dim=1).float(),
                        F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                        multiclass=True,
                    )

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()

            global_step += 1
            epoch_loss += loss.item()

        val_score = evaluate(model, val_loader)
        scheduler.step(val_score)
        print(f"epoch {epoch}  step {global_step}  train loss {epoch_loss / len(train_loader):.4f}  "
              f"lr {optimizer.param_groups[0]['lr']:.1e}  validation Dice {val_score:.3f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = UNet(n_channels=3, n_classes=3)
    train_model(model)
