"""Weather classification (Cloudy, Rain, Shine, Sunrise) in the style of the Studio Lab
"Weather Classification for Disaster Risk Reduction" notebook: images are read from one
folder per class under ./dataset, the folder names are encoded with a LabelEncoder, the data
are split into train/val/test and a CNN with a 4-way linear classifier is fine-tuned with
CrossEntropyLoss and SGD.

The Multi-class Weather Dataset cannot be downloaded here, so the dataset folder is written
first with small synthetic sky pictures (.npy) whose colours and textures depend on the class.
"""
import datetime
import glob
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)
device = torch.device("cpu")

CLASS_STYLE = {"Cloudy": (0.55, 0.58, 0.62, 0.05), "Rain": (0.30, 0.33, 0.38, 0.25),
               "Shine": (0.35, 0.60, 0.95, 0.03), "Sunrise": (0.95, 0.55, 0.25, 0.08)}


def unpack_dataset(root, per_class=(150, 110, 125, 175)):
    rng = np.random.RandomState(1)
    for (name, (r, g, b, grain)), n in zip(CLASS_STYLE.items(), per_class):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(n):
            ramp = np.linspace(1.0, 0.6, 32)[None, :, None]
            img = np.array([r, g, b])[:, None, None] * ramp * rng.uniform(0.75, 1.25)
            img = img + grain * rng.randn(3, 32, 32) + 0.08 * rng.randn(3, 1, 1)
            np.save(os.path.join(root, name, f"{name.lower()}{i}.npy"), np.clip(img, 0, 1).astype(np.float32))
    os.makedirs(os.path.join(root, ".ipynb_checkpoints"), exist_ok=True)


class LabelEncoder:
    """Minimal stand-in for sklearn.preprocessing.LabelEncoder (fit / transform)."""

    def fit(self, y):
        self.classes_ = np.unique(np.asarray(y))
        return self

    def transform(self, y):
        return np.searchsorted(self.classes_, np.asarray(y))


def GetImagesFromFolder(PATH, Class_Folder, ext):
    images = [np.load(file) for e in ext for file in sorted(glob.glob(PATH + Class_Folder + '/*.' + e))]
    print(f"Found {len(images)} in folder {Class_Folder}")
    np.random.shuffle(images)
    return images, np.array([Class_Folder for i in range(len(images))])


def train_val_test_split(images, labels, seed=42):
    idx = np.random.RandomState(seed).permutation(len(images))
    n_train, n_val = int(0.8 * len(idx)), int(0.9 * len(idx))
    pick = lambda ids: ([images[i] for i in ids], [labels[i] for i in ids])
    return pick(idx[:n_train]), pick(idx[n_train:n_val]), pick(idx[n_val:])


class WeatherDataset(Dataset):
    def __init__(self, ImageData, Target, le):
        self.ImageData = ImageData
        self.Target = torch.LongTensor(le.transform(Target))

    def __getitem__(self, index):
        x = torch.from_numpy(self.ImageData[index])
        y = self.Target[index]
        return x, y

    def __len__(self):
        return len(self.ImageData)


class WeatherNet(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        num_ftrs = 32
        self.classifier = nn.Linear(num_ftrs, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def train_model(model, criterion, optimizer, dataloaders, num_epochs=3):
    start_time = datetime.datetime.now().replace(microsecond=0)
    for epoch in range(1, num_epochs + 1):
        train_loss, valid_loss = 0.0, 0.0
        model.train()
        train_corrects = 0
        for data, target in dataloaders['train']:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            _, preds = torch.max(output, 1)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            train_loss += loss.item() * data.size(0)
            train_corrects += torch.sum(preds == target.data)
        train_loss = train_loss / len(dataloaders['train'].dataset)
        train_acc = (train_corrects.double() * 100) / len(dataloaders['train'].dataset)

        model.eval()
        val_corrects = 0
        with torch.no_grad():
            for data, target in dataloaders['val']:
                output = model(data)
                _, preds = torch.max(output, 1)
                valid_loss += criterion(output, target).item() * data.size(0)
                val_corrects += torch.sum(preds == target.data)
        valid_loss = valid_loss / len(dataloaders['val'].dataset)
        valid_acc = (val_corrects.double() * 100) / len(dataloaders['val'].dataset)
        print('Epoch: {} \tTraining Loss:  {:.6f} \tValidation Loss:  {:.6f}'.format(epoch, train_loss, valid_loss))
        print('\t\tTraining Acc:  {:.3f} \t\tValidation Acc:  {:.3f}'.format(train_acc, valid_acc))
    print(f'Time Taken: {datetime.datetime.now().replace(microsecond=0) - start_time}')
    return model


def main():
    workdir = tempfile.mkdtemp()
    DATA_PATH = os.path.join(workdir, 'dataset') + '/'
    unpack_dataset(DATA_PATH)

    FOLDERS = os.listdir(DATA_PATH)
    print(FOLDERS)

    ALL_IMAGES, ALL_LABELS = [], []
    ext = ['npy']
    for Class_Folder in sorted(FOLDERS):
        IMAGES, LABELS = GetImagesFromFolder(DATA_PATH, Class_Folder, ext)
        ALL_IMAGES.extend(IMAGES)
        ALL_LABELS.extend(LABELS)

    le = LabelEncoder().fit(FOLDERS)
    le_name_mapping = dict(zip(le.classes_.tolist(), le.transform(le.classes_).tolist()))
    print(le_name_mapping)

    train, val, test = train_val_test_split(ALL_IMAGES, ALL_LABELS)
    dataset_classes = ['Cloudy', 'Rain', 'Shine', 'Sunrise']
    image_datasets = {'train': WeatherDataset(*train, le), 'val': WeatherDataset(*val, le),
                      'test': WeatherDataset(*test, le)}
    batch_size = {'train': 8, 'val': 8, 'test': 8}
    dataloaders = {indx: DataLoader(image_datasets[indx], batch_size=batch_size[indx], shuffle=True)
                   for indx in batch_size.keys()}
    print("Size for Dataset: train %d, valid %d, test %d" % tuple(len(image_datasets[k]) for k in batch_size))

    n_classes = len(dataset_classes)
    model_ft = WeatherNet(n_classes).to(device)

    criterion = nn.CrossEntropyLoss()
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.01, momentum=0.5, weight_decay=0.01)

    print('Training of Model:')
    model_ft = train_model(model_ft, criterion, optimizer_ft, dataloaders, num_epochs=6)


if __name__ == '__main__':
    main()
