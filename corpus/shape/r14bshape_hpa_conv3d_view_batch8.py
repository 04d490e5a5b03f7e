"""Human Protein Atlas single-cell classification: a small Conv3d network over the four
stained channels (red, green, blue, yellow) of 128x128 cell slices, 18 protein locations,
one-hot targets and MSELoss, trained with SGD + momentum.

The real slices come from slice.py (one .npz per slice of the training set); here one slice
file is stood in for by synthetic images: each location lights up its own spot of the green
(protein) channel on top of noisy nucleus/microtubule/ER channels.
"""
import time
from argparse import ArgumentParser

import numpy as np
from torch import from_numpy, unsqueeze, FloatTensor, manual_seed
from torch.nn import Module, Conv3d, MaxPool3d, Linear, MSELoss
from torch.nn.functional import relu, softmax
from torch.optim import SGD
from torch.utils.data import Dataset, DataLoader

N_CLASSES = 18


def make_slice(n, seed, nx=128, ny=128):
    rng = np.random.RandomState(seed)
    images = rng.rand(n, 4, nx, ny).astype(np.float32) * 0.3
    targets = []
    yy, xx = np.mgrid[0:nx, 0:ny]
    for i in range(n):
        label = rng.randint(N_CLASSES)
        cy, cx = 20 + 22 * (label // 6), 14 + 20 * (label % 6)
        cy, cx = cy + rng.randint(-3, 4), cx + rng.randint(-3, 4)
        images[i, 1] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 40.0).astype(np.float32)
        images[i, 2] += np.exp(-((yy - 64) ** 2 + (xx - 64) ** 2) / 300.0).astype(np.float32)
        targets.append([label])
    return images, targets


class CellDataset(Dataset):
    def __init__(self, n=77, seed=1):
        self.Images, self.Targets = make_slice(n, seed)
        self.Indices = list(range(len(self.Targets)))

    def __len__(self):
        return len(self.Indices)

    def __getitem__(self, idx):
        index = self.Indices[idx]
        Inputs = unsqueeze(from_numpy(self.Images[index]), 1)
        Labels = FloatTensor([1 if i in self.Targets[index] else 0 for i in range(N_CLASSES)])
        return Inputs, Labels


# Net
#
# Simple convolutional neural network

class Net(Module):
    def __init__(self):
        super(Net, self).__init__()

        self.conv1    = Conv3d(in_channels  = 4,
                               out_channels = 6,
                               kernel_size  = (1,5,5),
                               stride       = 1,
                               padding      = 1)
        self.pool     = MaxPool3d(2)
        self.conv2    = Conv3d(in_channels  = 6,
                               out_channels = 16,
                               kernel_size  = (1,5,5),
                               stride       = 1,
                               padding      = 1)
        self.fc1      = Linear(in_features  = 8* 16* 1* 30* 30,
                               out_features = 120)

        self.fc2      = Linear(in_features  = 120,
                               out_features = 84)

        self.fc3      = Linear(in_features  = 84,
                               out_features = N_CLASSES)

    def forward(self, x):
        x = self.pool(relu(self.conv1(x.float())))
        x = self.pool(relu(self.conv2(x)))
        x = x.view(-1, 8* 16* 1* 30* 30)
        x = relu(self.fc1(x))
        x = relu(self.fc2(x))
        x = self.fc3(x)
        return softmax(x,dim=1)


# train_epoch
#
# Train for one epoch over the slice

def train_epoch(epoch,
                model      = None,
                criterion  = None,
                optimizer  = None,
                loader     = None,
                frequency  = 5):
    losses = []
    for j, data in enumerate(loader, 0):
        optimizer.zero_grad()
        inputs, labels = data
        outputs        = model(inputs)
        loss           = criterion(outputs, labels)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        if j % frequency == 0:
            mean_loss = np.mean(losses)
            losses.clear()
            print(f'{epoch}, 1,  {j}, {mean_loss}')


def accuracy(model, loader):
    matches = 0
    total   = 0
    for inputs, labels in loader:
        predictions = model(inputs)
        matches += (predictions.argmax(dim=1) == labels.argmax(dim=1)).sum().item()
        total   += len(labels)
    return matches / total


if __name__ == '__main__':
    parser = ArgumentParser('Train with HPA data')
    parser.add_argument('--n',         default = 1,    type = int,   help = 'Number of epochs for training')
    parser.add_argument('--momentum',  default = 0.9,  type = float, help = 'Momentum for optimization')
    parser.add_argument('--lr',        default = 0.01, type = float, help = 'Learning Rate for optimization')
    parser.add_argument('--frequency', default = 5,    type = int,   help = 'Controls frequency with which data logged')
    parser.add_argument('--batch',     default = 8,    type = int,   help = 'Batch size for training/validating')
    parser.add_argument('--seed',      default = 42,   type = int,   help = 'Used to seed random number generator')
    args = parser.parse_args()

    manual_seed(args.seed)
    start     = time.time()
    dataset   = CellDataset()
    loader    = DataLoader(dataset, batch_size = args.batch)
    model     = Net()
    criterion = MSELoss()
    optimizer = SGD(model.parameters(), lr = args.lr, momentum = args.momentum)
    for epoch in range(1, args.n + 1):
        train_epoch(epoch,
                    model     = model,
                    criterion = criterion,
                    optimizer = optimizer,
                    loader    = loader,
                    frequency = args.frequency)
        print(f'Epoch {epoch}: accuracy {accuracy(model, loader):.3f}')
    print(f'Elapsed Time (training network) {time.time() - start:.2f} s')
