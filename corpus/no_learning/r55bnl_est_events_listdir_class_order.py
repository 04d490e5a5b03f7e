"""Event-camera object classification with the Event Spike Tensor (EST): a learnable
value layer quantizes raw (x, y, t, p) events into a voxel grid that a small CNN
classifies. N-Caltech101-style recordings are exported to training/ and validation/
folders (one sub-folder per class, one .npy per recording) in a temporary directory."""
import os
import tempfile
from os import listdir
from os.path import join

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

torch.manual_seed(0)
np.random.seed(0)

H, W = 32, 32
CLASS_RECORDINGS = {"Faces_easy": 90, "inline_skate": 90, "binocular": 90, "chair": 90,
                    "metronome": 90, "snoopy": 90, "wild_cat": 6}


def synth_recording(class_id, rng, n_events=300):
    """A bar with a class-specific orientation sweeping across the sensor, plus noise."""
    angle = np.pi * class_id / 7
    t = np.sort(rng.uniform(0, 1, n_events))
    s = rng.uniform(-12, 12, n_events)
    off = (t - 0.5) * 16
    cx, cy = W / 2 + rng.normal(0, 2), H / 2 + rng.normal(0, 2)
    x = cx + s * np.cos(angle) - off * np.sin(angle) + rng.normal(0, 0.7, n_events)
    y = cy + s * np.sin(angle) + off * np.cos(angle) + rng.normal(0, 0.7, n_events)
    noise = rng.uniform(0, 1, n_events) < 0.3
    x[noise] = rng.uniform(0, W, noise.sum())
    y[noise] = rng.uniform(0, H, noise.sum())
    p = np.where(rng.uniform(0, 1, n_events) < 0.5, -1.0, 1.0)
    ev = np.stack([np.clip(x, 0, W - 1).round(), np.clip(y, 0, H - 1).round(), t, p], 1)
    return ev.astype(np.float32)


def export_dataset(root, val_fraction=0.15, seed=0):
    rng = np.random.default_rng(seed)
    for class_id, (name, n) in enumerate(CLASS_RECORDINGS.items()):
        n_val = int(val_fraction * n)
        for i in range(n):
            split = "validation" if i < n_val else "training"
            os.makedirs(join(root, split, name), exist_ok=True)
            np.save(join(root, split, name, f"image_{i:04d}.npy"), synth_recording(class_id, rng))


class NCaltech101:
    def __init__(self, root, augmentation=False):
        self.classes = listdir(root)
        self.files = []
        self.labels = []
        self.augmentation = augmentation
        for i, c in enumerate(self.classes):
            new_files = [join(root, c, f) for f in listdir(join(root, c))]
            self.files += new_files
            self.labels += [i] * len(new_files)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        label = self.labels[idx]
        events = np.load(self.files[idx]).astype(np.float32)
        if self.augmentation and np.random.random() < 0.5:
            events[:, 0] = W - 1 - events[:, 0]
        return events, label


def collate_events(data):
    labels, events = [], []
    for i, d in enumerate(data):
        labels.append(d[1])
        ev = np.concatenate([d[0], i * np.ones((len(d[0]), 1), dtype=np.float32)], 1)
        events.append(ev)
    return torch.from_numpy(np.concatenate(events, 0)), torch.tensor(labels)


class ValueLayer(nn.Module):
    def __init__(self, mlp_layers=(1, 30, 30, 1)):
        super().__init__()
        self.mlp = nn.ModuleList()
        for a, b in zip(mlp_layers[:-1], mlp_layers[1:]):
            self.mlp.append(nn.Linear(a, b))

    def forward(self, x):
        x = x[None, ..., None]
        for layer in self.mlp[:-1]:
            x = F.leaky_relu(layer(x), 0.1)
        return self.mlp[-1](x).squeeze()


class QuantizationLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.value_layer = ValueLayer()
        self.dim = dim

    def forward(self, events):
        B = int(1 + events[-1, -1].item())
        C, Hd, Wd = self.dim
        num_voxels = int(2 * np.prod(self.dim) * B)
        vox = events[0].new_full([num_voxels], fill_value=0)
        x, y, t, p, b = events.t()
        for bi in range(B):
            t[b == bi] /= t[b == bi].max()
        p = (p + 1) / 2
        idx_before_bins = x + Wd * y + 0 + Wd * Hd * C * p + Wd * Hd * C * 2 * b
        for i_bin in range(C):
            values = t * self.value_layer.forward(t - i_bin / (C - 1))
            idx = idx_before_bins + Wd * Hd * i_bin
            vox.put_(idx.long(), values, accumulate=True)
        vox = vox.view(-1, 2, C, Hd, Wd)
        return torch.cat([vox[:, 0, ...], vox[:, 1, ...]], 1)


class Classifier(nn.Module):
    def __init__(self, voxel_dimension=(5, H, W), num_classes=7):
        super().__init__()
        self.quantization_layer = QuantizationLayer(voxel_dimension)
        c = 2 * voxel_dimension[0]
        self.classifier = nn.Sequential(
            nn.Conv2d(c, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    def forward(self, x):
        vox = self.quantization_layer.forward(x)
        return self.classifier(vox), vox


def cross_entropy_loss_and_accuracy(prediction, target):
    loss = F.cross_entropy(prediction, target)
    accuracy = (prediction.argmax(1) == target).float().mean()
    return loss, accuracy


def main():
    tmp = tempfile.mkdtemp()
    export_dataset(tmp)
    training_dataset = NCaltech101(join(tmp, "training"), augmentation=True)
    validation_dataset = NCaltech101(join(tmp, "validation"))
    print(f"training: {len(training_dataset)} recordings, validation: {len(validation_dataset)}")
    training_loader = DataLoader(training_dataset, batch_size=16, shuffle=True,
                                 collate_fn=collate_events)
    validation_loader = DataLoader(validation_dataset, batch_size=32, collate_fn=collate_events)

    model = Classifier(num_classes=len(training_dataset.classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    lr_scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.9)

    iteration = 0
    for epoch in range(6):
        model.train()
        sum_loss, sum_acc = 0.0, 0.0
        for events, labels in training_loader:
            optimizer.zero_grad()
            pred_labels, representation = model(events)
            loss, accuracy = cross_entropy_loss_and_accuracy(pred_labels, labels)
            loss.backward()
            optimizer.step()
            sum_loss += loss.item()
            sum_acc += accuracy.item()
            iteration += 1
        lr_scheduler.step()
        print(f"Epoch {epoch} Training Loss {sum_loss / len(training_loader):.4f}  "
              f"Training Accuracy {sum_acc / len(training_loader):.4f}")

        model.eval()
        sum_loss, sum_acc, n = 0.0, 0.0, 0
        with torch.no_grad():
            for events, labels in validation_loader:
                pred_labels, _ = model(events)
                loss, accuracy = cross_entropy_loss_and_accuracy(pred_labels, labels)
                sum_loss += loss.item() * len(labels)
                sum_acc += accuracy.item() * len(labels)
                n += len(labels)
        print(f"Epoch {epoch} Validation Loss {sum_loss / n:.4f}  Validation Accuracy {sum_acc / n:.4f}"
              f"  (iteration {iteration})")


if __name__ == "__main__":
    main()
