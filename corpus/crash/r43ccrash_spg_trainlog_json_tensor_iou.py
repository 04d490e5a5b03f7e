"""Superpoint classification in the style of the SPG learning script: a small PointNet embeds
each superpoint's points, an MLP classifies the superpoint; per-epoch stats (accuracy, loss,
overall accuracy, average IoU from a confusion matrix) go to trainlog.json in the run folder."""
import json
import math
import os
import tempfile
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
N_CLASSES = 5
N_POINTS = 32
N_FEATS = 6


class SuperpointDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.clouds = []
        for y in self.labels.tolist():
            xyz = torch.randn(N_POINTS, 3, generator=g)
            scale = torch.tensor([1.0 + y, 1.0, 0.3 + 0.4 * y])
            xyz = xyz * scale / 3
            rgb = torch.rand(N_POINTS, 3, generator=g) * 0.5 + 0.1 * y
            self.clouds.append(torch.cat([xyz, rgb], 1))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.clouds[i], self.labels[i]


class PointNet(nn.Module):
    def __init__(self, nfeat, widths=(32, 64, 128)):
        super().__init__()
        layers, c = [], nfeat
        for w in widths:
            layers += [nn.Conv1d(c, w, 1), nn.BatchNorm1d(w), nn.ReLU()]
            c = w
        self.convs = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Linear(c, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, N_CLASSES))

    def forward(self, x):
        x = self.convs(x.transpose(1, 2))
        return self.fc(x.max(dim=2).values)


class ConfusionMatrix:
    def __init__(self, n):
        self.n = n
        self.confusion_matrix = torch.zeros(n, n, dtype=torch.long)

    def count_predicted_batch(self, gt, pred):
        self.confusion_matrix += torch.bincount(gt * self.n + pred, minlength=self.n * self.n).view(self.n, self.n)

    def get_overall_accuracy(self):
        return self.confusion_matrix.diag().sum().item() / self.confusion_matrix.sum().item()

    def get_average_intersection_union(self):
        cm = self.confusion_matrix.float()
        inter = cm.diag()
        union = cm.sum(0) + cm.sum(1) - inter
        return (inter[union > 0] / union[union > 0]).mean()


train_dataset = SuperpointDataset(640, 1)
test_dataset = SuperpointDataset(160, 2)
model = PointNet(N_FEATS)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3], gamma=0.5)
odir = tempfile.mkdtemp(prefix="spg_")


def train():
    model.train()
    loader = DataLoader(train_dataset, batch_size=16, shuffle=True, drop_last=True)
    confusion_matrix = ConfusionMatrix(N_CLASSES)
    total_loss, correct, seen = 0.0, 0, 0
    for bidx, (clouds, label_mode) in enumerate(loader):
        optimizer.zero_grad()
        outputs = model(clouds)
        loss = nn.functional.cross_entropy(outputs, label_mode)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        pred = outputs.argmax(1)
        correct += (pred == label_mode).sum().item()
        seen += label_mode.numel()
        confusion_matrix.count_predicted_batch(label_mode, pred)
        if bidx % 10 == 0:
            print(f"  batch {bidx} loss {loss.item():.4f}")
    return 100.0 * correct / seen, total_loss / len(loader), confusion_matrix.get_overall_accuracy(), confusion_matrix.get_average_intersection_union()


def evaluate():
    model.eval()
    loader = DataLoader(test_dataset, batch_size=32)
    confusion_matrix = ConfusionMatrix(N_CLASSES)
    total_loss = 0.0
    with torch.no_grad():
        for clouds, label_mode in loader:
            outputs = model(clouds)
            total_loss += nn.functional.cross_entropy(outputs, label_mode).item()
            confusion_matrix.count_predicted_batch(label_mode, outputs.argmax(1))
    return total_loss / len(loader), confusion_matrix.get_overall_accuracy(), confusion_matrix.get_average_intersection_union()


stats = []
best_iou = 0
for epoch in range(5):
    print(f"Epoch {epoch}/5 ({odir}):")
    acc, loss, oacc, avg_iou = train()
    scheduler.step()
    print("-> Train Loss: %1.4f   Train accuracy: %3.2f%%" % (loss, acc))
    loss_test, oacc_test, avg_iou_test = evaluate()
    print("-> Test Loss: %1.4f  Test oAcc: %3.2f%%  Test avgIoU: %3.2f%%" % (loss_test, 100 * oacc_test, 100 * avg_iou_test))
    if avg_iou_test > best_iou:
        best_iou = avg_iou_test
        torch.save({"epoch": epoch + 1, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()}, os.path.join(odir, "model.pth.tar"))
    stats.append({"epoch": epoch, "acc": acc, "loss": loss, "oacc": oacc, "avg_iou": avg_iou, "oacc_test": oacc_test, "avg_iou_test": avg_iou_test, "best_iou": best_iou})
    if math.isnan(loss):
        break
    with open(os.path.join(odir, "trainlog.json"), "w") as outfile:
        json.dump(stats, outfile, indent=4)
