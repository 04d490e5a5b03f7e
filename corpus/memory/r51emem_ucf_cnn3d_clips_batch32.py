"""3D CNN action recognition on UCF101-style clips (HHTseng video-classification
Conv3D/UCF101_3DCNN.py layout: two Conv3d + BatchNorm3d + ReLU + Dropout3d
blocks, three fully connected layers), grayscale frames resized to 128x128.

Offline stand-in for the extracted frames: each class is a bright blob moving
in its own direction across a noisy background, 28 frames per clip."""
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import data

# set path / parameters
img_x, img_y = 128, 128
fc_hidden1, fc_hidden2 = 128, 64
dropout = 0.0
k = 8
epochs = 2
batch_size = 32
learning_rate = 1e-4
log_interval = 1
begin_frame, end_frame, skip_frame = 1, 29, 1

torch.manual_seed(0)
np.random.seed(0)


def conv3D_output_size(img_size, padding, kernel_size, stride):
    outshape = (np.floor((img_size[0] + 2 * padding[0] - (kernel_size[0] - 1) - 1) / stride[0] + 1).astype(int),
                np.floor((img_size[1] + 2 * padding[1] - (kernel_size[1] - 1) - 1) / stride[1] + 1).astype(int),
                np.floor((img_size[2] + 2 * padding[2] - (kernel_size[2] - 1) - 1) / stride[2] + 1).astype(int))
    return outshape


class Dataset_3DCNN(data.Dataset):
    "Characterizes a dataset for PyTorch"
    def __init__(self, folders, labels, frames):
        self.labels = labels
        self.folders = folders
        self.frames = frames

    def __len__(self):
        return len(self.folders)

    def read_images(self, folder, label):
        g = torch.Generator().manual_seed(folder)
        T = len(self.frames)
        X = 0.2 * torch.randn(T, img_x, img_y, generator=g)
        angle = 2 * np.pi * label / k
        y0, x0 = [float(v) for v in torch.randint(40, 88, (2,), generator=g)]
        yy, xx = torch.meshgrid(torch.arange(img_x).float(), torch.arange(img_y).float(), indexing='ij')
        for t in range(T):
            cy = y0 + 1.5 * t * np.sin(angle)
            cx = x0 + 1.5 * t * np.cos(angle)
            X[t] += torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 60.0)
        return X

    def __getitem__(self, index):
        folder = self.folders[index]
        X = self.read_images(folder, self.labels[index]).unsqueeze_(0)
        y = torch.LongTensor([self.labels[index]])
        return X, y


class CNN3D(nn.Module):
    def __init__(self, t_dim=28, img_x=128, img_y=128, drop_p=0.2, fc_hidden1=256, fc_hidden2=128, num_classes=50):
        super(CNN3D, self).__init__()
        self.t_dim = t_dim
        self.img_x = img_x
        self.img_y = img_y
        self.fc_hidden1, self.fc_hidden2 = fc_hidden1, fc_hidden2
        self.drop_p = drop_p
        self.num_classes = num_classes
        self.ch1, self.ch2 = 32, 48
        self.k1, self.k2 = (5, 5, 5), (3, 3, 3)
        self.s1, self.s2 = (2, 2, 2), (2, 2, 2)
        self.pd1, self.pd2 = (0, 0, 0), (0, 0, 0)

        self.conv1_outshape = conv3D_output_size((self.t_dim, self.img_x, self.img_y), self.pd1, self.k1, self.s1)
        self.conv2_outshape = conv3D_output_size(self.conv1_outshape, self.pd2, self.k2, self.s2)

        self.conv1 = nn.Conv3d(in_channels=1, out_channels=self.ch1, kernel_size=self.k1, stride=self.s1,
                               padding=self.pd1)
        self.bn1 = nn.BatchNorm3d(self.ch1)
        self.conv2 = nn.Conv3d(in_channels=self.ch1, out_channels=self.ch2, kernel_size=self.k2, stride=self.s2,
                               padding=self.pd2)
        self.bn2 = nn.BatchNorm3d(self.ch2)
        self.relu = nn.ReLU(inplace=True)
        self.drop = nn.Dropout3d(self.drop_p)
        self.pool = nn.MaxPool3d(2)
        self.fc1 = nn.Linear(self.ch2 * self.conv2_outshape[0] * self.conv2_outshape[1] * self.conv2_outshape[2],
                             self.fc_hidden1)
        self.fc2 = nn.Linear(self.fc_hidden1, self.fc_hidden2)
        self.fc3 = nn.Linear(self.fc_hidden2, self.num_classes)

    def forward(self, x_3d):
        # Conv 1
        x = self.conv1(x_3d)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.drop(x)
        # Conv 2
        x = self.conv2(x)
        x = self.bn2(x)
        x = self.relu(x)
        x = self.drop(x)
        # FC 1 and 2
        x = x.view(x.size(0), -1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.dropout(x, p=self.drop_p, training=self.training)
        x = self.fc3(x)
        return x


def train(log_interval, model, device, train_loader, optimizer, epoch):
    model.train()
    losses = []
    scores = []
    N_count = 0
    for batch_idx, (X, y) in enumerate(train_loader):
        X, y = X.to(device), y.to(device).view(-1, )
        N_count += X.size(0)

        optimizer.zero_grad()
        output = model(X)
        loss = F.cross_entropy(output, y)
        losses.append(loss.item())

        y_pred = torch.max(output, 1)[1]
        step_score = (y_pred == y).float().mean().item()
        scores.append(step_score)

        loss.backward()
        optimizer.step()

        if (batch_idx + 1) % log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}, Accu: {:.2f}%'.format(
                epoch + 1, N_count, len(train_loader.dataset), 100. * (batch_idx + 1) / len(train_loader),
                loss.item(), 100 * step_score))
    return losses, scores


use_cuda = torch.cuda.is_available()
device = torch.device("cuda:0" if use_cuda else "cpu")
params = {'batch_size': batch_size, 'shuffle': True, 'num_workers': 0, 'pin_memory': True} if use_cuda \
    else {'batch_size': batch_size, 'shuffle': True, 'num_workers': 0}

all_X_list = list(range(64))
all_y_list = [i % k for i in all_X_list]
selected_frames = np.arange(begin_frame, end_frame, skip_frame).tolist()

train_set = Dataset_3DCNN(all_X_list, all_y_list, selected_frames)
train_loader = data.DataLoader(train_set, **params)

cnn3d = CNN3D(t_dim=len(selected_frames), img_x=img_x, img_y=img_y,
              drop_p=dropout, fc_hidden1=fc_hidden1, fc_hidden2=fc_hidden2, num_classes=k).to(device)
optimizer = torch.optim.Adam(cnn3d.parameters(), lr=learning_rate)

for epoch in range(epochs):
    t0 = time.time()
    train_losses, train_scores = train(log_interval, cnn3d, device, train_loader, optimizer, epoch)
    print('Epoch {}: mean loss {:.4f}, mean accuracy {:.2f}% ({:.1f}s)'.format(
        epoch + 1, np.mean(train_losses), 100 * np.mean(train_scores), time.time() - t0))
