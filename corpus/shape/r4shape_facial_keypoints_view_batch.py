"""Facial keypoint detection: a CNN regresses the 68 (x, y) landmarks of a face.

Greyscale face crops of 224x224 (synthetic here: a face oval with eyes, brows, nose and mouth
drawn at a random position, scale and tilt, plus noise), keypoints normalised as in the
project notebook: (pts - 100) / 50.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


def face_template():
    """68 landmarks in the iBUG layout, in a unit face frame."""
    jaw = [(-0.9 * math.cos(t), 0.2 + 0.9 * math.sin(t)) for t in np.linspace(0.1, math.pi - 0.1, 17)]
    brows = [(-0.7 + 0.1 * i, -0.45 - 0.05 * math.sin(i)) for i in range(5)]
    brows += [(0.3 + 0.1 * i, -0.45 - 0.05 * math.sin(4 - i)) for i in range(5)]
    nose = [(0.0, -0.3 + 0.1 * i) for i in range(4)] + [(-0.15 + 0.075 * i, 0.15) for i in range(5)]
    eyes = []
    for cx in (-0.4, 0.4):
        eyes += [(cx + 0.15 * math.cos(t), -0.25 + 0.07 * math.sin(t)) for t in np.linspace(0, 2 * math.pi, 7)[:6]]
    mouth = [(0.35 * math.cos(t), 0.5 + 0.15 * math.sin(t)) for t in np.linspace(0, 2 * math.pi, 13)[:12]]
    mouth += [(0.2 * math.cos(t), 0.5 + 0.07 * math.sin(t)) for t in np.linspace(0, 2 * math.pi, 9)[:8]]
    return np.array(jaw + brows + nose + eyes + mouth, dtype=np.float32)


class FacialKeypointsDataset(Dataset):
    """Face Landmarks dataset: dict samples {'image': (1, 224, 224), 'keypoints': (68, 2)}."""

    def __init__(self, n, size=224):
        self.size = size
        template = face_template()
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
        self.images, self.keypoints = [], []
        for _ in range(n):
            scale = np.random.uniform(45, 70)
            cx, cy = np.random.uniform(80, 144, size=2)
            tilt = np.random.uniform(-0.3, 0.3)
            rot = np.array([[math.cos(tilt), -math.sin(tilt)], [math.sin(tilt), math.cos(tilt)]], dtype=np.float32)
            pts = template @ rot.T * scale + np.array([cx, cy], dtype=np.float32)
            img = 0.2 + 0.05 * np.random.randn(size, size).astype(np.float32)
            img += 0.5 * (((xx - cx) / (0.95 * scale)) ** 2 + ((yy - cy) / (1.2 * scale)) ** 2 < 1)
            for px, py in pts[17:].round().astype(int):
                img[py - 2:py + 3, px - 2:px + 3] += 0.4
            self.images.append(np.clip(img, 0, 1))
            self.keypoints.append(pts)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        image = torch.from_numpy(self.images[idx]).unsqueeze(0)
        key_pts = torch.from_numpy((self.keypoints[idx] - 100) / 50.0)
        return {'image': image, 'keypoints': key_pts}


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.conv3 = nn.Conv2d(32, 64, 3)
        self.conv4 = nn.Conv2d(64, 64, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(64 * 12 * 12, 256)
        self.fc1_drop = nn.Dropout(p=0.3)
        self.fc2 = nn.Linear(256, 136)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = self.pool(F.relu(self.conv3(x)))
        x = self.pool(F.relu(self.conv4(x)))
        x = x.view(x.size(0), -1)
        x = self.fc1_drop(F.relu(self.fc1(x)))
        return self.fc2(x)


def train_net(n_epochs):
    net.train()
    for epoch in range(n_epochs):
        running_loss = 0.0
        for batch_i, data in enumerate(train_loader):
            images = data['image']
            key_pts = data['keypoints']

            # flatten pts
            key_pts = key_pts.view(1, -1)

            key_pts = key_pts.type(torch.FloatTensor)
            images = images.type(torch.FloatTensor)

            output_pts = net(images)
            loss = criterion(output_pts, key_pts)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            running_loss += loss.item()
            if batch_i % 10 == 9:
                print('Epoch: {}, Batch: {}, Avg. Loss: {}'.format(epoch + 1, batch_i + 1, running_loss / 10))
                running_loss = 0.0
    print('Finished Training')


if __name__ == '__main__':
    transformed_dataset = FacialKeypointsDataset(300)
    print('Number of images: ', len(transformed_dataset))
    sample = transformed_dataset[0]
    print(0, sample['image'].size(), sample['keypoints'].size())

    batch_size = 10
    train_loader = DataLoader(transformed_dataset, batch_size=batch_size, shuffle=True, num_workers=0)

    net = Net()
    print(net)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(net.parameters(), lr=0.001)

    train_net(n_epochs=5)
