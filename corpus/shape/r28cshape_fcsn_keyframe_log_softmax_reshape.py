"""FCSN: fully convolutional sequence network for video summarization.

Per-frame CNN features of a video (n_feature x n_frame) go through a 1D FCN that
scores every frame as key frame / not key frame. The class weights counter the
rarity of key frames (as for TVSum). Frame-level F-score on held-out videos is
reported every few epochs.
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_FEATURE = 64
N_FRAME = 96
N_CLASS = 2


class VideoFeatures(Dataset):
    def __init__(self, n_videos, seed):
        g = torch.Generator().manual_seed(seed)
        direction = torch.randn(N_FEATURE, generator=torch.Generator().manual_seed(11))
        direction = direction / direction.norm()
        self.features, self.labels = [], []
        for _ in range(n_videos):
            importance = torch.randn(1, 1, N_FRAME, generator=g)
            importance = nn.functional.avg_pool1d(importance, 9, stride=1, padding=4).flatten() * 3
            feat = torch.randn(N_FEATURE, N_FRAME, generator=g) + direction[:, None] * importance[None, :] * 2
            label = (importance > importance.quantile(0.85)).long()
            self.features.append(feat)
            self.labels.append(label)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        return self.features[i], self.labels[i], i


class FCSN(nn.Module):
    def __init__(self, n_class=2):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv1d(N_FEATURE, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv1d(64, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(),
                                  nn.MaxPool1d(2))
        self.enc3 = nn.Sequential(nn.Conv1d(64, 128, 3, padding=2, dilation=2), nn.BatchNorm1d(128), nn.ReLU(),
                                  nn.MaxPool1d(2))
        self.score = nn.Conv1d(128, n_class, 1)
        self.skip = nn.Conv1d(64, n_class, 1)
        self.up1 = nn.ConvTranspose1d(n_class, n_class, 4, stride=2, padding=1)
        self.up2 = nn.ConvTranspose1d(n_class, n_class, 4, stride=2, padding=1)

    def forward(self, x):
        h1 = self.enc1(x)
        h2 = self.enc2(h1)
        h3 = self.enc3(h2)
        s = self.up1(self.score(h3)) + self.skip(h2)
        return self.up2(s)


class Solver(object):
    def __init__(self, train_loader, test_loader, n_epochs=8):
        self.train_loader = train_loader
        self.test_loader = test_loader
        self.n_epochs = n_epochs
        self.model = FCSN(N_CLASS)
        self.optimizer = optim.Adam(self.model.parameters(), lr=1e-3)
        self.model.train()
        self.tvsum_weight = torch.tensor([0.55989996, 4.67362574])

    @staticmethod
    def sum_loss(pred_score, gt_labels, weight=None):
        n_batch, n_class, n_frame = pred_score.shape
        log_p = torch.log_softmax(pred_score, dim=1).reshape(-1, n_class)
        gt_labels = gt_labels.reshape(-1)
        criterion = torch.nn.NLLLoss(weight)
        loss = criterion(log_p, gt_labels)
        return loss

    def train(self):
        for epoch_i in range(self.n_epochs):
            sum_loss_history = []
            for batch_i, (feature, label, _) in enumerate(self.train_loader):
                pred_score = self.model(feature)
                loss = self.sum_loss(pred_score, label, self.tvsum_weight)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                sum_loss_history.append(loss.detach())

            mean_loss = torch.stack(sum_loss_history).mean().item()
            print(f"Epoch {epoch_i}  sum loss: {mean_loss:.3f}")
            if (epoch_i + 1) % 2 == 0:
                self.evaluate(epoch_i)
                self.model.train()

    def evaluate(self, epoch_i):
        self.model.eval()
        tp = fp = fn = 0
        with torch.no_grad():
            for feature, label, idx in self.test_loader:
                pred_label = torch.argmax(self.model(feature), dim=1)
                tp += ((pred_label == 1) & (label == 1)).sum().item()
                fp += ((pred_label == 1) & (label == 0)).sum().item()
                fn += ((pred_label == 0) & (label == 1)).sum().item()
        precision = tp / max(tp + fp, 1)
        recall = tp / max(tp + fn, 1)
        f_score = 2 * precision * recall / max(precision + recall, 1e-8)
        print(f"  eval epoch {epoch_i}: precision {precision:.3f} recall {recall:.3f} F-score {f_score:.3f}")


if __name__ == '__main__':
    train_loader = DataLoader(VideoFeatures(256, 1), batch_size=16, shuffle=True)
    test_loader = DataLoader(VideoFeatures(64, 2), batch_size=16)
    solver = Solver(train_loader, test_loader)
    solver.train()
