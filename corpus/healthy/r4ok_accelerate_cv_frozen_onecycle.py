"""Accelerate cv_example: fine-tune only the classifier of a frozen backbone.

huggingface/accelerate examples/cv_example.py run offline on CPU. As in the
example: file names carry the label (extract_label regex), the Dataset returns
{"image", "label"} dicts, the whole model is frozen and only
model.get_classifier() is trained, batches are normalised with the model's
default_cfg mean/std, Adam(lr / 25) with OneCycleLR(max_lr=lr) stepped after
every batch, accelerator.prepare/backward, eval with gather_for_metrics.

Offline changes: timm's resnet50d is replaced by a small ResNet-D style network
with the same timm-like interface (its seeded random weights stand in for the
ImageNet ones); the Oxford-IIIT Pet images are replaced by synthetic
"photos" whose breed shows as a colour palette and a stripe texture;
torchvision's RandomResizedCrop/Resize/ToTensor are done on tensors.
"""
import argparse
import math
import os
import re

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, Dataset

from accelerate import Accelerator
from accelerate.utils import set_seed


# ------------------------------------------------------------------ stand-ins
BREEDS = ["abyssinian", "beagle", "bengal", "boxer", "persian", "pug"]
PALETTES = torch.tensor([
    [0.80, 0.55, 0.30], [0.55, 0.40, 0.25], [0.85, 0.70, 0.40],
    [0.60, 0.35, 0.20], [0.90, 0.90, 0.88], [0.75, 0.65, 0.50],
])
ANGLES = [0.0, 0.5, 1.0, 1.6, 2.2, 2.7]
FREQS = [0.25, 0.45, 0.35, 0.6, 0.15, 0.5]


def load_image(fname):
    """Deterministic synthetic 48x48 'photo' for a file name like beagle_12.jpg."""
    label = BREEDS.index(extract_label(fname))
    idx = int(re.search(r"_(\d+)\.jpg$", fname).groups()[0])
    g = torch.Generator().manual_seed(1000 * label + idx)
    yy, xx = torch.meshgrid(torch.arange(48.0), torch.arange(48.0), indexing="ij")
    theta = ANGLES[label] + 0.3 * (torch.rand(1, generator=g).item() - 0.5)
    phase = 6.28 * torch.rand(1, generator=g).item()
    stripes = 0.5 + 0.5 * torch.sin(FREQS[label] * (xx * math.cos(theta) + yy * math.sin(theta)) + phase)
    colour = PALETTES[label] + 0.08 * torch.randn(3, generator=g)
    bg = torch.rand(3, generator=g)[:, None, None] * 0.6
    cy, cx = (torch.rand(2, generator=g) * 16 + 16).tolist()
    blob = torch.sigmoid(0.5 * (18.0 - ((yy - cy) ** 2 + (xx - cx) ** 2).sqrt()))
    animal = colour[:, None, None] * (0.6 + 0.4 * stripes)
    img = blob * animal + (1 - blob) * bg + 0.05 * torch.randn(3, 48, 48, generator=g)
    return img.clamp(0, 1)


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0)):
        self.size, self.scale = size, scale

    def __call__(self, img):
        _, h, w = img.shape
        area = h * w * float(np.random.uniform(*self.scale))
        ratio = math.exp(np.random.uniform(math.log(3 / 4), math.log(4 / 3)))
        ch = min(h, int(round(math.sqrt(area / ratio))))
        cw = min(w, int(round(math.sqrt(area * ratio))))
        top, left = np.random.randint(0, h - ch + 1), np.random.randint(0, w - cw + 1)
        crop = img[:, top:top + ch, left:left + cw]
        return F.interpolate(crop[None], size=self.size, mode="bilinear", align_corners=False)[0]


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        return F.interpolate(img[None], size=self.size, mode="bilinear", align_corners=False)[0]


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class Bottleneck(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        mid = cout // 2
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(
            nn.AvgPool2d(stride) if stride > 1 else nn.Identity(),
            nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.downsample(x))


class TinyResNetD(nn.Module):
    default_cfg = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}

    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layer1 = Bottleneck(32, 64, 1)
        self.layer2 = Bottleneck(64, 128, 2)
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def get_classifier(self):
        return self.fc

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(self.global_pool(x).flatten(1))


def create_model(name, pretrained=False, num_classes=1000):
    return TinyResNetD(num_classes=num_classes)


# ------------------------------------------------------------------ the example
# Function to get the label from the filename
def extract_label(fname):
    stem = fname.split(os.path.sep)[-1]
    return re.search(r"^(.*)_\d+\.jpg$", stem).groups()[0]


class PetsDataset(Dataset):
    def __init__(self, file_names, image_transform=None, label_to_id=None):
        self.file_names = file_names
        self.image_transform = image_transform
        self.label_to_id = label_to_id

    def __len__(self):
        return len(self.file_names)

    def __getitem__(self, idx):
        fname = self.file_names[idx]
        image = load_image(fname)
        if self.image_transform is not None:
            image = self.image_transform(image)
        label = extract_label(fname)
        if self.label_to_id is not None:
            label = self.label_to_id[label]
        return {"image": image, "label": label}


def training_function(config, args):
    # Initialize accelerator
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)

    # Sample hyper-parameters for learning rate, batch size, seed and a few other HPs
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])
    image_size = config["image_size"]
    if not isinstance(image_size, (list, tuple)):
        image_size = (image_size, image_size)

    # Grab all the image filenames
    file_names = [os.path.join(args.data_dir, f"{breed}_{i}.jpg") for breed in BREEDS for i in range(100)]

    # Build the label correspondences
    all_labels = [extract_label(fname) for fname in file_names]
    id_to_label = list(set(all_labels))
    id_to_label.sort()
    label_to_id = {lbl: i for i, lbl in enumerate(id_to_label)}

    # Set the seed before splitting the data.
    set_seed(seed)
    # Split our filenames between train and validation
    random_perm = np.random.permutation(len(file_names))
    cut = int(0.8 * len(file_names))
    train_split = random_perm[:cut]
    eval_split = random_perm[cut:]

    # For training we use a simple RandomResizedCrop
    train_tfm = Compose([RandomResizedCrop(image_size, scale=(0.5, 1.0))])
    train_dataset = PetsDataset(
        [file_names[i] for i in train_split], image_transform=train_tfm, label_to_id=label_to_id
    )

    # For evaluation, we use a deterministic Resize
    eval_tfm = Compose([Resize(image_size)])
    eval_dataset = PetsDataset([file_names[i] for i in eval_split], image_transform=eval_tfm, label_to_id=label_to_id)

    # Instantiate dataloaders.
    train_dataloader = DataLoader(train_dataset, shuffle=True, batch_size=batch_size, num_workers=0)
    eval_dataloader = DataLoader(eval_dataset, shuffle=False, batch_size=batch_size, num_workers=0)

    # Instantiate the model (we build the model here so that the seed also control new weights initialization)
    model = create_model("resnet50d", pretrained=True, num_classes=len(label_to_id))

    model = model.to(accelerator.device)

    # Freezing the base model
    for param in model.parameters():
        param.requires_grad = False
    for param in model.get_classifier().parameters():
        param.requires_grad = True

    # We normalize the batches of images to be a bit faster.
    mean = torch.tensor(model.default_cfg["mean"])[None, :, None, None].to(accelerator.device)
    std = torch.tensor(model.default_cfg["std"])[None, :, None, None].to(accelerator.device)

    # Instantiate optimizer
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lr / 25)

    # Instantiate learning rate scheduler
    lr_scheduler = OneCycleLR(optimizer=optimizer, max_lr=lr, epochs=num_epochs, steps_per_epoch=len(train_dataloader))

    # Prepare everything
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    # Now we train the model
    for epoch in range(num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            inputs = (batch["image"] - mean) / std
            outputs = model(inputs)
            loss = torch.nn.functional.cross_entropy(outputs, batch["label"])
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            if step % 5 == 0:
                accelerator.print(f"epoch {epoch} step {step}: loss {loss.item():.4f} "
                                  f"lr {lr_scheduler.get_last_lr()[0]:.5f}")

        model.eval()
        accurate = 0
        num_elems = 0
        for _, batch in enumerate(eval_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            inputs = (batch["image"] - mean) / std
            with torch.no_grad():
                outputs = model(inputs)
            predictions = outputs.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["label"]))
            accurate_preds = predictions == references
            num_elems += accurate_preds.shape[0]
            accurate += accurate_preds.long().sum()

        eval_metric = accurate.item() / num_elems
        # Use accelerator.print to print only on the main process.
        accelerator.print(f"epoch {epoch}: {100 * eval_metric:.2f}")
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument("--data_dir", default="pets/images", help="The data folder on disk.")
    parser.add_argument(
        "--mixed_precision",
        type=str,
        default=None,
        choices=["no", "fp16", "bf16", "fp8"],
        help="Whether to use mixed precision.",
    )
    parser.add_argument("--cpu", action="store_true", default=True, help="If passed, will train on the CPU.")
    args = parser.parse_args()
    config = {"lr": 3e-2, "num_epochs": 3, "seed": 42, "batch_size": 16, "image_size": 32}
    training_function(config, args)


if __name__ == "__main__":
    main()
