"""Prototypical Networks for few-shot classification in Lightning, after the UvA-DL tutorial 12
"Meta-Learning - Learning to Learn" (Lightning-AI/tutorials, course_UvA-DL/12-meta-learning).

CIFAR100 with an 80/10/10 class split is replaced by 40 synthetic classes of 3x16x16 images
(30 for training, 10 held out for validation), the DenseNet encoder by a small conv net. The
FewShotBatchSampler (support and query set drawn as one batch of 2*K per class, interleaved and
split with chunk), the prototypes as class means of the support features, log_softmax over the
negative squared distances fed to cross_entropy, AdamW with MultiStepLR and the Trainer with
ModelCheckpoint on val_acc follow the tutorial.
"""
import os
import random
import tempfile
from collections import defaultdict

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn

CHECKPOINT_PATH = tempfile.mkdtemp()
L.seed_everything(42)

NUM_CLASSES, PER_CLASS, SIZE = 40, 48, 16


def make_all_images():
    g = torch.Generator().manual_seed(0)
    prototypes = (torch.rand(NUM_CLASSES, 3, SIZE // 2, SIZE // 2, generator=g) > 0.5).float()
    prototypes = F.interpolate(prototypes, scale_factor=2, mode="nearest")
    tints = 0.5 + torch.rand(NUM_CLASSES, 3, 1, 1, generator=g)
    targets = torch.arange(NUM_CLASSES).repeat_interleave(PER_CLASS)
    imgs = prototypes[targets] * tints[targets]
    shifts = torch.randint(-3, 4, (len(targets), 2), generator=g)
    imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), dims=(1, 2)) for im, s in zip(imgs, shifts)])
    imgs = imgs * (0.7 + 0.6 * torch.rand(len(targets), 1, 1, 1, generator=g))
    imgs = imgs + 1.0 * torch.randn(imgs.shape, generator=g)
    return imgs, targets


class ImageDataset(data.Dataset):
    def __init__(self, imgs, targets, img_transform=None):
        super().__init__()
        self.img_transform = img_transform
        self.imgs = imgs
        self.targets = targets

    def __getitem__(self, idx):
        img, target = self.imgs[idx], self.targets[idx]
        if self.img_transform is not None:
            img = self.img_transform(img)
        return img, target

    def __len__(self):
        return self.imgs.shape[0]


def dataset_from_labels(imgs, targets, class_set, **kwargs):
    class_mask = (targets[:, None] == class_set[None, :]).any(dim=-1)
    return ImageDataset(imgs=imgs[class_mask], targets=targets[class_mask], **kwargs)


def train_transform(img):
    if random.random() < 0.5:
        img = img.flip(-1)
    return img


class FewShotBatchSampler:
    def __init__(self, dataset_targets, N_way, K_shot, include_query=False, shuffle=True, shuffle_once=False):
        super().__init__()
        self.dataset_targets = dataset_targets
        self.N_way = N_way
        self.K_shot = K_shot
        self.shuffle = shuffle
        self.include_query = include_query
        if self.include_query:
            self.K_shot *= 2
        self.batch_size = self.N_way * self.K_shot  # Number of overall images per batch

        # Organize examples by class
        self.classes = torch.unique(self.dataset_targets).tolist()
        self.num_classes = len(self.classes)
        self.indices_per_class = {}
        self.batches_per_class = {}  # Number of K-shot batches that each class can provide
        for c in self.classes:
            self.indices_per_class[c] = torch.where(self.dataset_targets == c)[0]
            self.batches_per_class[c] = self.indices_per_class[c].shape[0] // self.K_shot

        # Create a list of classes from which we select the N classes per batch
        self.iterations = sum(self.batches_per_class.values()) // self.N_way
        self.class_list = [c for c in self.classes for _ in range(self.batches_per_class[c])]
        if shuffle_once or self.shuffle:
            self.shuffle_data()
        else:
            # For testing, we iterate over classes instead of shuffling them
            sort_idxs = [
                i + p * self.num_classes for i, c in enumerate(self.classes) for p in range(self.batches_per_class[c])
            ]
            self.class_list = np.array(self.class_list)[np.argsort(sort_idxs)].tolist()

    def shuffle_data(self):
        # Shuffle the examples per class
        for c in self.classes:
            perm = torch.randperm(self.indices_per_class[c].shape[0])
            self.indices_per_class[c] = self.indices_per_class[c][perm]
        # Shuffle the class list from which we sample. Note that this way of shuffling
        # does not prevent to choose the same class twice in a batch. However, for
        # training and validation, this is not a problem.
        random.shuffle(self.class_list)

    def __iter__(self):
        # Shuffle data
        if self.shuffle:
            self.shuffle_data()

        # Sample few-shot batches
        start_index = defaultdict(int)
        for it in range(self.iterations):
            class_batch = self.class_list[it * self.N_way : (it + 1) * self.N_way]  # Select N classes for the batch
            index_batch = []
            for c in class_batch:  # For each class, select the next K examples and add them to the batch
                index_batch.extend(self.indices_per_class[c][start_index[c] : start_index[c] + self.K_shot])
                start_index[c] += self.K_shot
            if self.include_query:  # If we return support+query set, sort them so that they are easy to split
                index_batch = index_batch[::2] + index_batch[1::2]
            yield index_batch

    def __len__(self):
        return self.iterations


def split_batch(imgs, targets):
    support_imgs, query_imgs = imgs.chunk(2, dim=0)
    support_targets, query_targets = targets.chunk(2, dim=0)
    return support_imgs, query_imgs, support_targets, query_targets


def get_convnet(output_size):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 2 * 2, output_size),
    )


class ProtoNet(L.LightningModule):
    def __init__(self, proto_dim, lr):
        """Inputs.

        proto_dim - Dimensionality of prototype feature space
        lr - Learning rate of Adam optimizer
        """
        super().__init__()
        self.save_hyperparameters()
        self.model = get_convnet(output_size=self.hparams.proto_dim)

    def configure_optimizers(self):
        optimizer = optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[140, 180], gamma=0.1)
        return [optimizer], [scheduler]

    @staticmethod
    def calculate_prototypes(features, targets):
        # Given a stack of features vectors and labels, return class prototypes
        # features - shape [N, proto_dim], targets - shape [N]
        classes, _ = torch.unique(targets).sort()  # Determine which classes we have
        prototypes = []
        for c in classes:
            p = features[torch.where(targets == c)[0]].mean(dim=0)  # Average class feature vectors
            prototypes.append(p)
        prototypes = torch.stack(prototypes, dim=0)
        # Return the 'classes' tensor to know which prototype belongs to which class
        return prototypes, classes

    def classify_feats(self, prototypes, classes, feats, targets):
        # Classify new examples with prototypes and return classification error
        dist = torch.pow(prototypes[None, :] - feats[:, None], 2).sum(dim=2)  # Squared euclidean distance
        preds = F.log_softmax(-dist, dim=1)
        labels = (classes[None, :] == targets[:, None]).long().argmax(dim=-1)
        acc = (preds.argmax(dim=1) == labels).float().mean()
        return preds, labels, acc

    def calculate_loss(self, batch, mode):
        # Determine training loss for a given support and query set
        imgs, targets = batch
        features = self.model(imgs)  # Encode all images of support and query set
        support_feats, query_feats, support_targets, query_targets = split_batch(features, targets)
        prototypes, classes = ProtoNet.calculate_prototypes(support_feats, support_targets)
        preds, labels, acc = self.classify_feats(prototypes, classes, query_feats, query_targets)
        loss = F.cross_entropy(preds, labels)

        self.log("%s_loss" % mode, loss)
        self.log("%s_acc" % mode, acc)
        return loss

    def training_step(self, batch, batch_idx):
        return self.calculate_loss(batch, mode="train")

    def validation_step(self, batch, batch_idx):
        self.calculate_loss(batch, mode="val")


class PrintLoss(Callback):
    def __init__(self, every=20):
        self.every = every
        self.losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].item())
        if trainer.global_step == 1 or trainer.global_step % self.every == 0:
            print(f"step {trainer.global_step:4d}  train_loss(avg {self.every}) {np.mean(self.losses[-self.every:]):.4f}")

    def on_validation_epoch_end(self, trainer, pl_module):
        m = trainer.callback_metrics
        if "val_acc" in m:
            print(f"{'sanity check' if trainer.sanity_checking else 'epoch'} {trainer.current_epoch}  val_loss {m['val_loss']:.4f}  val_acc {m['val_acc']:.3f}")


def train_model(model_class, train_loader, val_loader, **kwargs):
    trainer = L.Trainer(
        default_root_dir=os.path.join(CHECKPOINT_PATH, model_class.__name__),
        accelerator="cpu",
        devices=1,
        max_epochs=6,
        callbacks=[
            ModelCheckpoint(save_weights_only=True, mode="max", monitor="val_acc"),
            LearningRateMonitor("epoch"),
            PrintLoss(),
        ],
        logger=CSVLogger(CHECKPOINT_PATH),
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    L.seed_everything(42)  # To be reproducable
    model = model_class(**kwargs)
    trainer.fit(model, train_loader, val_loader)
    print("best val_acc %.3f" % trainer.checkpoint_callback.best_model_score.item())
    model = model_class.load_from_checkpoint(
        trainer.checkpoint_callback.best_model_path
    )  # Load best checkpoint after training
    return model


if __name__ == "__main__":
    all_imgs, all_targets = make_all_images()
    classes = torch.randperm(NUM_CLASSES)
    train_classes, val_classes = classes[:30], classes[30:]
    train_set = dataset_from_labels(all_imgs, all_targets, train_classes, img_transform=train_transform)
    val_set = dataset_from_labels(all_imgs, all_targets, val_classes)

    N_WAY = 5
    K_SHOT = 4
    train_data_loader = data.DataLoader(
        train_set,
        batch_sampler=FewShotBatchSampler(train_set.targets, include_query=True, N_way=N_WAY, K_shot=K_SHOT, shuffle=True),
        num_workers=0,
    )
    val_data_loader = data.DataLoader(
        val_set,
        batch_sampler=FewShotBatchSampler(
            val_set.targets, include_query=True, N_way=N_WAY, K_shot=K_SHOT, shuffle=False, shuffle_once=True
        ),
        num_workers=0,
    )

    protonet_model = train_model(
        ProtoNet, proto_dim=64, lr=2e-4, train_loader=train_data_loader, val_loader=val_data_loader
    )
