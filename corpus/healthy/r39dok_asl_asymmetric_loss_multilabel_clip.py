"""Multi-label classification with the Asymmetric Loss of Alibaba-MIIL/ASL (src/loss_functions/losses.py):
gamma_neg=4, gamma_pos=1, probability clip 0.05 on the negatives, focusing weights computed with grad
disabled, summed over the batch. MS-COCO and the TResNet are replaced by synthetic 64-d "image features"
with 20 sparse, imbalanced labels and an MLP; validation reports mAP as in the repo's validate_multi."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(3)
device = torch.device("cpu")
NUM_CLASSES = 20


class AsymmetricLoss(nn.Module):
    def __init__(self, gamma_neg=4, gamma_pos=1, clip=0.05, eps=1e-8, disable_torch_grad_focal_loss=True):
        super(AsymmetricLoss, self).__init__()

        self.gamma_neg = gamma_neg
        self.gamma_pos = gamma_pos
        self.clip = clip
        self.disable_torch_grad_focal_loss = disable_torch_grad_focal_loss
        self.eps = eps

    def forward(self, x, y):
        x_sigmoid = torch.sigmoid(x)
        xs_pos = x_sigmoid
        xs_neg = 1 - x_sigmoid

        if self.clip is not None and self.clip > 0:
            xs_neg = (xs_neg + self.clip).clamp(max=1)

        los_pos = y * torch.log(xs_pos.clamp(min=self.eps))
        los_neg = (1 - y) * torch.log(xs_neg.clamp(min=self.eps))
        loss = los_pos + los_neg

        if self.gamma_neg > 0 or self.gamma_pos > 0:
            if self.disable_torch_grad_focal_loss:
                torch.set_grad_enabled(False)
            pt0 = xs_pos * y
            pt1 = xs_neg * (1 - y)
            pt = pt0 + pt1
            one_sided_gamma = self.gamma_pos * y + self.gamma_neg * (1 - y)
            one_sided_w = torch.pow(1 - pt, one_sided_gamma)
            if self.disable_torch_grad_focal_loss:
                torch.set_grad_enabled(True)
            loss *= one_sided_w

        return -loss.sum()


class MultiLabelFeatures(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(NUM_CLASSES, 64, generator=torch.Generator().manual_seed(99))
        freq = torch.linspace(0.25, 0.02, NUM_CLASSES)
        self.y = (torch.rand(n, NUM_CLASSES, generator=g) < freq).float()
        self.x = self.y @ w * 0.6 + torch.randn(n, 64, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def average_precision(scores, targets):
    order = torch.argsort(scores, descending=True)
    t = targets[order]
    tp = t.cumsum(0)
    prec = tp / torch.arange(1, len(t) + 1)
    return (prec * t).sum() / t.sum().clamp(min=1)


def mAP(scores, targets):
    aps = [average_precision(scores[:, k], targets[:, k]) for k in range(targets.shape[1]) if targets[:, k].sum() > 0]
    return 100 * torch.stack(aps).mean().item()


def validate_multi(model, loader):
    model.eval()
    preds, targets = [], []
    with torch.no_grad():
        for x, y in loader:
            preds.append(torch.sigmoid(model(x)))
            targets.append(y)
    model.train()
    return mAP(torch.cat(preds), torch.cat(targets))


def main():
    train_loader = DataLoader(MultiLabelFeatures(4096, seed=0), batch_size=64, shuffle=True)
    val_loader = DataLoader(MultiLabelFeatures(1024, seed=1), batch_size=256)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, NUM_CLASSES)).to(device)
    criterion = AsymmetricLoss(gamma_neg=4, gamma_pos=1, clip=0.05, disable_torch_grad_focal_loss=True)
    optimizer = torch.optim.Adam(params=model.parameters(), lr=2e-4, weight_decay=0)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-4, steps_per_epoch=len(train_loader),
                                                    epochs=4, pct_start=0.2)

    print("init mAP {:.2f}".format(validate_multi(model, val_loader)))
    for epoch in range(4):
        for i, (inputData, target) in enumerate(train_loader):
            output = model(inputData).float()
            loss = criterion(output, target)
            model.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            if i % 32 == 0:
                print('Epoch [{}/{}], Step [{}/{}], LR {:.1e}, Loss: {:.1f}'.format(
                    epoch, 4, str(i).zfill(3), str(len(train_loader)).zfill(3),
                    scheduler.get_last_lr()[0], loss.item()))
        print("epoch {} val mAP {:.2f}".format(epoch, validate_multi(model, val_loader)))


if __name__ == "__main__":
    main()
