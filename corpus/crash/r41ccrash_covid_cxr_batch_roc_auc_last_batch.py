"""COVID-19 vs other findings on chest X-rays: a small ResNet-style classifier trained with BCE
on a stratified 80/20 split, logging loss / ROC-AUC / accuracy for train and validation, in the
style of the defeatcovid19 trainer. Synthetic 32x32 radiographs stand in for the
covid-chestxray-dataset images."""
import math
from timeit import default_timer as timer

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler

torch.manual_seed(7)
np.random.seed(7)


def roc_auc_score(y_true, y_score):
    """Binary ROC AUC with the contract of sklearn.metrics.roc_auc_score (scikit-learn is not
    installed in this environment)."""
    y_true = np.asarray(y_true).ravel()
    y_score = np.asarray(y_score).ravel()
    if len(np.unique(y_true)) != 2:
        raise ValueError("Only one class present in y_true. ROC AUC score is not defined in that case.")
    order = np.argsort(y_score, kind="mergesort")
    ranks = np.empty(len(y_score))
    ranks[order] = np.arange(1, len(y_score) + 1)
    n_pos = (y_true == 1).sum()
    n_neg = len(y_true) - n_pos
    return np.float64((ranks[y_true == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class Accuracy:
    def __call__(self, labels, preds):
        return ((preds > 0.5).float() == labels).float().mean()


def train_test_split(indices, test_size, stratify):
    """Stratified split, as sklearn.model_selection.train_test_split(..., stratify=labels)."""
    indices, stratify = np.asarray(indices), np.asarray(stratify)
    train, test = [], []
    for c in np.unique(stratify):
        members = np.random.permutation(indices[stratify == c])
        n_test = int(round(test_size * len(members)))
        test += members[:n_test].tolist()
        train += members[n_test:].tolist()
    return np.random.permutation(train).tolist(), np.random.permutation(test).tolist()


class CovidChestxrayDataset(Dataset):
    """COVID-19 (label 1) against other pneumonias / no finding (label 0)."""

    def __init__(self, n_covid=116, n_other=47, size=32):
        self.size = size
        self.labels = np.array([1] * n_covid + [0] * n_other)
        rng = np.random.default_rng(0)
        yy, xx = np.mgrid[0:size, 0:size] / size
        lungs = np.exp(-((xx - 0.3) ** 2 + (yy - 0.5) ** 2) / 0.03) \
            + np.exp(-((xx - 0.7) ** 2 + (yy - 0.5) ** 2) / 0.03)
        images = []
        for label in self.labels:
            img = 0.6 - 0.4 * lungs + 0.08 * rng.standard_normal((size, size))
            if label == 1:
                cx, cy = rng.choice([0.3, 0.7]), rng.uniform(0.55, 0.75)
                img += 0.35 * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 0.01)
            images.append(img)
        self.images = np.stack(images).astype(np.float32)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return torch.from_numpy(self.images[idx]).unsqueeze(0), self.labels[idx]

    def __repr__(self):
        return f"CovidChestxrayDataset(size={self.size}, n={len(self)})"


class SubsetRandomDataLoader(DataLoader):
    def __init__(self, dataset, indices, batch_size):
        super().__init__(dataset, batch_size=batch_size, sampler=SubsetRandomSampler(indices))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = BasicBlock(16, 32, 2)
        self.layer2 = BasicBlock(32, 64, 2)
        self.fc = nn.Linear(64, 1)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.sigmoid(self.fc(x)).squeeze(1)


class Trainer:
    def __init__(self, classifier, dataset, batch_size):
        self.classifier = classifier
        self.batch_size = batch_size
        print('Trainer started with classifier: {} dataset: {} batch size: {}'.format(
            classifier.__class__.__name__, dataset, batch_size))
        self.train_dataset = dataset
        self.train_idx, self.validation_idx = train_test_split(
            list(range(len(dataset))), test_size=0.2, stratify=dataset.labels)
        self.train_loader = SubsetRandomDataLoader(dataset, self.train_idx, batch_size)
        self.validation_loader = SubsetRandomDataLoader(dataset, self.validation_idx, batch_size)
        print('Train set: {}'.format(len(self.train_idx)))
        print('Validation set: {}'.format(len(self.validation_idx)))
        self.it_per_epoch = math.ceil(len(self.train_idx) / self.batch_size)
        print('Training with {} mini-batches per epoch'.format(self.it_per_epoch))

    def run(self, max_epochs=10, lr=0.01):
        model = self.classifier
        it = 0
        epoch = 0
        it_log = 1
        it_smooth = self.it_per_epoch
        self.optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=0.0001)
        self.scheduler = optim.lr_scheduler.StepLR(self.optimizer, 2 * self.it_per_epoch, gamma=0.9)
        criterion = nn.BCELoss()
        metrics = [Accuracy(), roc_auc_score]

        train_loss = train_roc = train_acc = 0
        print('                    |         VALID        |        TRAIN         |         ')
        print(' lr     iter  epoch | loss    roc    acc   | loss    roc    acc   |  time   ')
        print('------------------------------------------------------------------------------')
        start = timer()
        while epoch < max_epochs:
            smoothed_train_loss = smoothed_train_roc = smoothed_train_acc = 0
            smoothed_sum = 0
            for inputs, labels in self.train_loader:
                epoch = (it + 1) / self.it_per_epoch
                lr = self.scheduler.get_last_lr()[0]

                model.train()
                inputs = inputs.float()
                labels = labels.float()
                preds = model(inputs)
                loss = criterion(preds, labels)

                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()

                with torch.no_grad():
                    batch_acc, batch_roc = [i(labels.cpu(), preds.cpu()).item() for i in metrics]

                batch_loss = loss.item()
                smoothed_train_loss += batch_loss
                smoothed_train_roc += batch_roc
                smoothed_train_acc += batch_acc
                smoothed_sum += 1
                if (it + 1) % it_smooth == 0 and it > 0:
                    train_loss = smoothed_train_loss / smoothed_sum
                    train_roc = smoothed_train_roc / smoothed_sum
                    train_acc = smoothed_train_acc / smoothed_sum
                    smoothed_train_loss = smoothed_train_roc = smoothed_train_acc = 0
                    smoothed_sum = 0

                if it % it_log == 0:
                    print("{:5f} {:4d} {:5.1f} |                      | {:0.3f}  {:0.3f}  {:0.3f}  | {:6.2f}".format(
                        lr, it, epoch, batch_loss, batch_roc, batch_acc, timer() - start))
                it += 1

            valid_loss, valid_m = self.do_valid(model, criterion, metrics)
            valid_acc, valid_roc = valid_m
            print("{:5f} {:4d} {:5.1f} | {:0.3f}* {:0.3f}  {:0.3f}  | {:0.3f}* {:0.3f}  {:0.3f}  | {:6.2f}".format(
                lr, it, epoch, valid_loss, valid_roc, valid_acc, train_loss, train_roc, train_acc, timer() - start))

    def do_valid(self, model, criterion, metrics):
        model.eval()
        losses = []
        labels_all, preds_all = [], []
        for inputs, labels in self.validation_loader:
            with torch.no_grad():
                preds = model(inputs.float())
                losses.append(criterion(preds, labels.float()).item())
            labels_all.append(labels.float())
            preds_all.append(preds)
        labels_all, preds_all = torch.cat(labels_all), torch.cat(preds_all)
        m = [i(labels_all, preds_all).item() for i in metrics]
        return float(np.mean(losses)), m


if __name__ == '__main__':
    dataset = CovidChestxrayDataset()
    classifier = SmallResNet()
    trainer = Trainer(classifier, dataset, batch_size=64)
    trainer.run(max_epochs=20, lr=0.01)
