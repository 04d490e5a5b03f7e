"""CheXNet-style multi-label chest X-ray classifier (14 findings) with a small DenseNet.

Synthetic 32x32 "radiographs" stand in for ChestX-ray14: every finding adds a blob at its own
location. The trainer follows the CheXNet recipe: Adam 1e-4, BCELoss on sigmoid outputs,
ReduceLROnPlateau on the validation loss, best checkpoint saved to a temp dir.
"""
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader, Dataset

CLASS_COUNT = 14


class DatasetGenerator(Dataset):
    def __init__(self, n, seed, size=32):
        rng = np.random.RandomState(seed)
        self.labels = (rng.rand(n, CLASS_COUNT) < 0.2).astype(np.float32)
        images = 0.3 * rng.randn(n, 1, size, size).astype(np.float32)
        yy, xx = np.mgrid[0:size, 0:size]
        centres = np.random.RandomState(0).randint(4, size - 4, (CLASS_COUNT, 2))
        for c, (cy, cx) in enumerate(centres):
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 6.0).astype(np.float32)
            images[:, 0] += self.labels[:, c, None, None] * blob
        self.images = np.repeat(images, 3, axis=1)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index]), torch.from_numpy(self.labels[index])

    def __len__(self):
        return len(self.labels)


class DenseLayer(nn.Module):
    def __init__(self, in_ch, growth, bn_size=4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.norm1(x)))
        out = self.conv2(F.relu(self.norm2(out)))
        return torch.cat([x, out], 1)


class Transition(nn.Sequential):
    def __init__(self, in_ch, out_ch):
        super().__init__(nn.BatchNorm2d(in_ch), nn.ReLU(inplace=True),
                         nn.Conv2d(in_ch, out_ch, 1, bias=False), nn.AvgPool2d(2))


class DenseNet121(nn.Module):
    """A narrow DenseNet (growth 8) with the CheXNet head: Linear + Sigmoid."""

    def __init__(self, classCount, growth=8, blocks=(3, 4, 6), init_features=16):
        super().__init__()
        layers = [nn.Conv2d(3, init_features, 3, padding=1, bias=False)]
        ch = init_features
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(ch, growth))
                ch += growth
            if i != len(blocks) - 1:
                layers.append(Transition(ch, ch // 2))
                ch //= 2
        layers += [nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(ch, classCount), nn.Sigmoid())

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


class ChexnetTrainer:

    @staticmethod
    def train(trBatchSize=16, trMaxEpoch=2, nTrain=256, nVal=640, launchTimestamp=None):
        torch.manual_seed(0)
        model = DenseNet121(CLASS_COUNT)

        datasetTrain = DatasetGenerator(nTrain, seed=1)
        datasetVal = DatasetGenerator(nVal, seed=2)
        dataLoaderTrain = DataLoader(dataset=datasetTrain, batch_size=trBatchSize, shuffle=True)
        dataLoaderVal = DataLoader(dataset=datasetVal, batch_size=trBatchSize, shuffle=False)

        optimizer = optim.Adam(model.parameters(), lr=0.0001, betas=(0.9, 0.999), eps=1e-08,
                               weight_decay=1e-5)
        scheduler = ReduceLROnPlateau(optimizer, factor=0.1, patience=5, mode='min')
        loss = torch.nn.BCELoss(reduction='mean')

        outDir = tempfile.mkdtemp(prefix="chexnet_")
        lossMIN = 100000
        for epochID in range(0, trMaxEpoch):
            trainLoss = ChexnetTrainer.epochTrain(model, dataLoaderTrain, optimizer, loss)
            lossVal, losstensor = ChexnetTrainer.epochVal(model, dataLoaderVal, loss)
            timestampEND = time.strftime("%d%m%Y-%H%M%S")

            scheduler.step(losstensor.item())

            if lossVal < lossMIN:
                lossMIN = lossVal
                torch.save({'epoch': epochID + 1, 'state_dict': model.state_dict(),
                            'best_loss': lossMIN, 'optimizer': optimizer.state_dict()},
                           os.path.join(outDir, 'm-' + str(launchTimestamp) + '.pth.tar'))
                print('Epoch [' + str(epochID + 1) + '] [save] [' + timestampEND + '] train= '
                      + f"{trainLoss:.4f}" + ' loss= ' + f"{lossVal:.4f}")
            else:
                print('Epoch [' + str(epochID + 1) + '] [----] [' + timestampEND + '] train= '
                      + f"{trainLoss:.4f}" + ' loss= ' + f"{lossVal:.4f}")
            sys.stdout.flush()

    @staticmethod
    def epochTrain(model, dataLoader, optimizer, loss):
        model.train()
        total, n = 0.0, 0
        for batchID, (input, target) in enumerate(dataLoader):
            varInput = torch.autograd.Variable(input)
            varTarget = torch.autograd.Variable(target)
            varOutput = model(varInput)

            lossvalue = loss(varOutput, varTarget)

            optimizer.zero_grad()
            lossvalue.backward()
            optimizer.step()
            total += lossvalue.item()
            n += 1
            if batchID % 5 == 0:
                print(f"  batch {batchID:3d} loss {lossvalue.item():.4f}")
        return total / n

    @staticmethod
    def epochVal(model, dataLoader, loss):
        model.eval()

        lossVal = 0
        lossValNorm = 0
        losstensorMean = 0

        for i, (input, target) in enumerate(dataLoader):
            varInput = torch.autograd.Variable(input, volatile=True)
            varTarget = torch.autograd.Variable(target, volatile=True)
            varOutput = model(varInput)

            losstensor = loss(varOutput, varTarget)
            losstensorMean += losstensor

            lossVal += losstensor.item()
            lossValNorm += 1

        outLoss = lossVal / lossValNorm
        losstensorMean = losstensorMean / lossValNorm

        return outLoss, losstensorMean


if __name__ == "__main__":
    ChexnetTrainer.train(launchTimestamp=time.strftime("%d%m%Y-%H%M%S"))
