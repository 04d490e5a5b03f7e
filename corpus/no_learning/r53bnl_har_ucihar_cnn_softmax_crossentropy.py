"""Human activity recognition on UCI-HAR style inertial windows (9 channels x 128 samples, 6 activities)
with a small 2-layer CNN, trained with SGD + momentum."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

BATCH_SIZE = 64
N_EPOCH = 10
LEARNING_RATE = 0.01
DEVICE = torch.device('cpu')
ACTIVITIES = ['walking', 'upstairs', 'downstairs', 'sitting', 'standing', 'laying']


def make_windows(n, rng):
    t = np.arange(128, dtype=np.float32) / 50.0
    y = rng.randint(0, 6, size=n)
    freqs = np.array([1.8, 2.2, 2.6, 0.0, 0.0, 0.0], dtype=np.float32)
    amps = np.array([0.35, 0.35, 0.35, 0.02, 0.02, 0.02], dtype=np.float32)
    grav = np.array([[0.9, 0.1, 0.1], [0.85, 0.2, 0.1], [0.85, 0.1, 0.2],
                     [0.7, 0.5, 0.1], [0.95, 0.05, 0.05], [0.1, 0.2, 0.95]], dtype=np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    axis = (np.arange(9) % 3).reshape(1, 9, 1)
    x = amps[y].reshape(n, 1, 1) * np.sin(2 * np.pi * freqs[y].reshape(n, 1, 1) * t + phase + axis)
    x[:, 6:, :] += grav[y][:, :, None]
    x = x + rng.normal(0, 0.25, size=(n, 9, 128))
    return x.astype(np.float32), y


class HARDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.samples, self.labels = make_windows(n, rng)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.samples[idx], self.labels[idx]


class Network(nn.Module):
    def __init__(self):
        super(Network, self).__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(in_channels=9, out_channels=32, kernel_size=(1, 9)),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(1, 2), stride=2)
        )
        self.conv2 = nn.Sequential(
            nn.Conv2d(in_channels=32, out_channels=64, kernel_size=(1, 9)),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(1, 2), stride=2)
        )
        self.fc1 = nn.Sequential(
            nn.Linear(in_features=64 * 26, out_features=128),
            nn.ReLU()
        )
        self.fc2 = nn.Sequential(
            nn.Linear(in_features=128, out_features=64),
            nn.ReLU()
        )
        self.fc3 = nn.Sequential(
            nn.Linear(in_features=64, out_features=6)
        )

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(out)
        out = out.reshape(-1, 64 * 26)
        out = self.fc1(out)
        out = self.fc2(out)
        out = self.fc3(out)
        out = F.softmax(out, dim=1)
        return out


def train(model, optimizer, train_loader, test_loader):
    n_batch = len(train_loader.dataset) // BATCH_SIZE
    criterion = nn.CrossEntropyLoss()

    for e in range(N_EPOCH):
        model.train()
        correct, total_loss = 0, 0
        total = 0
        for index, (sample, target) in enumerate(train_loader):
            sample, target = sample.to(DEVICE).float(), target.to(DEVICE).long()
            sample = sample.view(-1, 9, 1, 128)
            output = model(sample)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            _, predicted = torch.max(output.data, 1)
            total += target.size(0)
            correct += (predicted == target).sum()
            if index % 10 == 0:
                print('Epoch: [{}/{}], Batch: [{}/{}], loss:{:.4f}'.format(e + 1, N_EPOCH, index + 1, n_batch, loss.item()))
        acc_train = float(correct) * 100.0 / total
        print('Epoch: [{}/{}], loss: {:.4f}, train acc: {:.2f}%'.format(e + 1, N_EPOCH, total_loss / n_batch, acc_train))

        model.train(False)
        with torch.no_grad():
            correct, total = 0, 0
            for sample, target in test_loader:
                sample, target = sample.to(DEVICE).float(), target.to(DEVICE).long()
                sample = sample.view(-1, 9, 1, 128)
                output = model(sample)
                _, predicted = torch.max(output.data, 1)
                total += target.size(0)
                correct += (predicted == target).sum()
        print('Epoch: [{}/{}], test acc: {:.2f}%'.format(e + 1, N_EPOCH, float(correct) * 100 / total))


if __name__ == '__main__':
    torch.manual_seed(10)
    train_loader = DataLoader(HARDataset(1280, 0), batch_size=BATCH_SIZE, shuffle=True, drop_last=True)
    test_loader = DataLoader(HARDataset(256, 1), batch_size=BATCH_SIZE, shuffle=False)
    model = Network().to(DEVICE)
    optimizer = optim.SGD(params=model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    train(model, optimizer, train_loader, test_loader)
