"""Attention-based deep multiple instance learning (Ilse et al. 2018) in the style of
AMLab-Amsterdam/AttentionDeepMIL: bags of digit-like images, a bag is positive when it holds at
least one '9'; gated attention pooling, trained one bag at a time with the Bernoulli NLL."""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data_utils


def make_templates(rng, n_classes=10, size=16):
    yy, xx = np.mgrid[0:size, 0:size] / size
    templates = []
    for c in range(n_classes):
        img = np.zeros((size, size))
        for _ in range(3):
            cx, cy = rng.uniform(0.25, 0.75, 2)
            sx, sy = rng.uniform(0.04, 0.12, 2)
            img += np.exp(-((xx - cx) ** 2 / (2 * sx ** 2) + (yy - cy) ** 2 / (2 * sy ** 2)))
        templates.append(np.clip(img, 0, 1))
    return np.stack(templates).astype(np.float32)


class MnistBags(data_utils.Dataset):
    def __init__(self, target_number=9, mean_bag_length=8, var_bag_length=2, num_bag=100, seed=1, train=True):
        self.target_number = target_number
        self.mean_bag_length = mean_bag_length
        self.var_bag_length = var_bag_length
        self.num_bag = num_bag
        self.r = np.random.RandomState(seed)
        self.templates = make_templates(np.random.RandomState(0))
        self.bags_list, self.labels_list = self._create_bags()

    def _digit(self, label):
        img = np.roll(self.templates[label], tuple(self.r.randint(-1, 2, 2)), axis=(0, 1))
        img = img + 0.2 * self.r.randn(*img.shape).astype(np.float32)
        return (img - 0.1307) / 0.3081

    def _create_bags(self):
        bags_list, labels_list = [], []
        for i in range(self.num_bag):
            bag_length = int(self.r.normal(self.mean_bag_length, self.var_bag_length, 1)[0])
            bag_length = max(bag_length, 1)
            labels = self.r.randint(0, 10, bag_length)
            if i % 2 == 0 and not (labels == self.target_number).any():
                labels[self.r.randint(bag_length)] = self.target_number
            elif i % 2 == 1:
                labels[labels == self.target_number] = self.r.randint(0, 9)
            imgs = np.stack([self._digit(l) for l in labels])[:, None]
            bags_list.append(torch.from_numpy(imgs.astype(np.float32)))
            labels_list.append(torch.from_numpy(labels == self.target_number))
        return bags_list, labels_list

    def __len__(self):
        return len(self.labels_list)

    def __getitem__(self, index):
        bag = self.bags_list[index]
        label = [max(self.labels_list[index]), self.labels_list[index]]
        return bag, label


class GatedAttention(nn.Module):
    def __init__(self):
        super(GatedAttention, self).__init__()
        self.L = 500
        self.D = 128
        self.K = 1

        self.feature_extractor_part1 = nn.Sequential(
            nn.Conv2d(1, 20, kernel_size=5),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2),
            nn.Conv2d(20, 50, kernel_size=3),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2)
        )
        self.feature_extractor_part2 = nn.Sequential(
            nn.Linear(50 * 2 * 2, self.L),
            nn.ReLU(),
        )
        self.attention_V = nn.Sequential(nn.Linear(self.L, self.D), nn.Tanh())
        self.attention_U = nn.Sequential(nn.Linear(self.L, self.D), nn.Sigmoid())
        self.attention_weights = nn.Linear(self.D, self.K)
        self.classifier = nn.Sequential(nn.Linear(self.L * self.K, 1), nn.Sigmoid())

    def forward(self, x):
        x = x.squeeze(0)

        H = self.feature_extractor_part1(x)
        H = H.view(-1, 50 * 2 * 2)
        H = self.feature_extractor_part2(H)  # NxL

        A_V = self.attention_V(H)  # NxD
        A_U = self.attention_U(H)  # NxD
        A = self.attention_weights(A_V * A_U)  # NxK
        A = torch.transpose(A, 1, 0)  # KxN
        A = F.softmax(A, dim=1)

        M = torch.mm(A, H)  # KxL

        Y_prob = self.classifier(M)
        Y_hat = torch.ge(Y_prob, 0.5).float()
        return Y_prob, Y_hat, A

    def calculate_classification_error(self, X, Y):
        Y = Y.float()
        _, Y_hat, _ = self.forward(X)
        error = 1. - Y_hat.eq(Y).cpu().float().mean().item()
        return error, Y_hat

    def calculate_objective(self, X, Y):
        Y = Y.float()
        Y_prob, _, A = self.forward(X)
        Y_prob = torch.clamp(Y_prob, min=1e-5, max=1. - 1e-5)
        neg_log_likelihood = -1. * (Y * torch.log(Y_prob) + (1. - Y) * torch.log(1. - Y_prob))
        return neg_log_likelihood, A


def train(model, optimizer, train_loader, epoch):
    model.train()
    train_loss = 0.
    train_error = 0.
    for batch_idx, (data, label) in enumerate(train_loader):
        bag_label = label[0]
        optimizer.zero_grad()
        loss, _ = model.calculate_objective(data, bag_label)
        train_loss += loss.item()
        error, _ = model.calculate_classification_error(data, bag_label)
        train_error += error
        loss.backward()
        optimizer.step()
    train_loss /= len(train_loader)
    train_error /= len(train_loader)
    print('Epoch: {}, Loss: {:.4f}, Train error: {:.4f}'.format(epoch, train_loss, train_error))


def test(model, test_loader):
    model.eval()
    test_loss = 0.
    test_error = 0.
    with torch.no_grad():
        for batch_idx, (data, label) in enumerate(test_loader):
            bag_label = label[0]
            instance_labels = label[1]
            loss, attention_weights = model.calculate_objective(data, bag_label)
            test_loss += loss.item()
            error, predicted_label = model.calculate_classification_error(data, bag_label)
            test_error += error
    test_error /= len(test_loader)
    test_loss /= len(test_loader)
    print('\nTest Set, Loss: {:.4f}, Test error: {:.4f}\n'.format(test_loss, test_error))
    return test_error


def main():
    torch.manual_seed(1)
    print('Load Train and Test Set')
    train_loader = data_utils.DataLoader(MnistBags(num_bag=80, seed=1, train=True), batch_size=1, shuffle=True)
    test_loader = data_utils.DataLoader(MnistBags(num_bag=40, seed=2, train=False), batch_size=1, shuffle=False)

    print('Init Model')
    model = GatedAttention()
    optimizer = optim.Adam(model.parameters(), lr=0.0005, betas=(0.9, 0.999), weight_decay=10e-5)

    print('Start Training')
    start = time.time()
    test(model, test_loader)
    for epoch in range(1, 4):
        train(model, optimizer, train_loader, epoch)
    print('Start Testing')
    test(model, test_loader)
    print('done in {:.1f}s'.format(time.time() - start))


if __name__ == "__main__":
    main()
