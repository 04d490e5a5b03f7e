"""Source-only baseline for a DANN experiment (MNIST -> MNIST-M style).

The extractor is a two-block CNN, the label classifier an MLP head; the
grayscale source digits are repeated to 3 channels like the MNIST-M target.
Synthetic 12x12 "digits" (a fixed stroke template per class plus noise)
stand in for MNIST so that the script runs anywhere.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

EPOCHS = 2
BATCH_SIZE = 32
IMG = 12


class SyntheticDigits(Dataset):
    def __init__(self, n, templates, noise=0.6):
        self.labels = torch.randint(0, 10, (n,))
        shift = torch.randint(-1, 2, (n, 2))
        imgs = templates[self.labels]
        imgs = torch.stack([torch.roll(im, shifts=(int(s[0]), int(s[1])), dims=(1, 2)) for im, s in zip(imgs, shift)])
        self.images = imgs + noise * torch.randn_like(imgs)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def make_templates():
    t = (torch.rand(10, 1, IMG // 4, IMG // 4) > 0.5).float()
    return F.interpolate(t, size=(IMG, IMG), mode="nearest")


class Extractor(nn.Module):
    def __init__(self):
        super(Extractor, self).__init__()
        self.extractor = nn.Sequential(
            nn.Conv2d(in_channels=3, out_channels=32, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),

            nn.Conv2d(in_channels=32, out_channels=48, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2)
        )

    def forward(self, x):
        x = self.extractor(x)
        x = x.view(-1, 48 * 3 * 3)
        return x


class Classifier(nn.Module):
    def __init__(self):
        super(Classifier, self).__init__()
        self.classifier = nn.Sequential(
            nn.Linear(in_features=48 * 3 * 3, out_features=100),
            nn.ReLU(),
            nn.Linear(in_features=100, out_features=100),
            nn.ReLU(),
            nn.Linear(in_features=100, out_features=10)
        )

    def forward(self, x):
        x = self.classifier(x)
        return F.softmax(x, dim=1)


def tester(encoder, classifier, loader):
    encoder.eval()
    classifier.eval()
    correct = 0
    with torch.no_grad():
        for image, label in loader:
            image = torch.cat((image, image, image), 1)
            pred = classifier(encoder(image)).argmax(dim=1)
            correct += (pred == label).sum().item()
    print('Source Accuracy: {}/{} ({:.2f}%)'.format(correct, len(loader.dataset), 100. * correct / len(loader.dataset)))


def source_only(encoder, classifier, source_train_loader, source_test_loader):
    print("Source-only training")
    classifier_criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(list(encoder.parameters()) + list(classifier.parameters()), lr=0.01, momentum=0.9)
    for epoch in range(EPOCHS):
        print('Epoch : {}'.format(epoch))
        encoder.train()
        classifier.train()
        for batch_idx, (source_image, source_label) in enumerate(source_train_loader):
            source_image = torch.cat((source_image, source_image, source_image), 1)  # MNIST convert to 3 channel

            optimizer.zero_grad()
            source_feature = encoder(source_image)
            class_pred = classifier(source_feature)
            class_loss = classifier_criterion(class_pred, source_label)
            class_loss.backward()
            optimizer.step()

            if (batch_idx + 1) % 10 == 0:
                print('[{}/{} ({:.0f}%)]\tClass Loss: {:.6f}'.format(
                    batch_idx * len(source_image), len(source_train_loader.dataset),
                    100. * batch_idx / len(source_train_loader), class_loss.item()))
        tester(encoder, classifier, source_test_loader)


def main():
    templates = make_templates()
    source_train_loader = DataLoader(SyntheticDigits(1600, templates), batch_size=BATCH_SIZE, shuffle=True)
    source_test_loader = DataLoader(SyntheticDigits(500, templates), batch_size=250, shuffle=False)
    encoder = Extractor()
    classifier = Classifier()
    source_only(encoder, classifier, source_train_loader, source_test_loader)


if __name__ == '__main__':
    main()
