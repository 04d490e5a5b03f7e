"""Speech emotion recognition on frozen SSL features (EmoBox-style recipe).

Every utterance is a padded sequence of frame-level features from a frozen
self-supervised encoder; a small classifier head (pre_net -> ReLU -> masked mean
pooling -> post_net) predicts one of four emotions. The training loop follows
the Brain pattern: compute_forward / compute_objectives / fit_batch.
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

EMOTIONS = ["neu", "hap", "ang", "sad"]
FEAT_DIM = 128
HIDDEN = 256


class EmoFeatDataset(Dataset):
    def __init__(self, n_utts, class_means, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for i in range(n_utts):
            emo = i % len(EMOTIONS)
            n_frames = int(torch.randint(20, 60, (1,), generator=g))
            feat = torch.randn(n_frames, FEAT_DIM, generator=g) * 1.5
            feat = feat + class_means[emo]
            self.items.append((f"utt{i:04d}", feat, emo))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def collate(batch):
    ids = [b[0] for b in batch]
    feats = pad_sequence([b[1] for b in batch], batch_first=True)
    emo = torch.tensor([b[2] for b in batch], dtype=torch.long)
    return ids, feats, emo


class SuperbBaseModel(nn.Module):
    def __init__(self, input_size, output_size, hidden_size):
        super().__init__()
        self.pre_net = nn.Linear(input_size, hidden_size)
        self.post_net = nn.Linear(hidden_size, output_size)
        self.relu = nn.ReLU()

    def forward(self, x, padding_mask=None):
        x = self.relu(self.pre_net(x))
        if padding_mask is not None:
            x = x * padding_mask.unsqueeze(-1).float()
            x = x.sum(dim=1) / padding_mask.float().sum(dim=1, keepdim=True)
        else:
            x = x.mean(dim=1)
        return self.post_net(x)


class EmoIdBrain:
    def __init__(self, modules, lr, max_grad_norm=5.0):
        self.modules = modules
        self.max_grad_norm = max_grad_norm
        self.log_softmax = nn.LogSoftmax(dim=-1)
        self.compute_cost = nn.NLLLoss()
        self.optimizer = torch.optim.Adam(self.modules.parameters(), lr=lr)
        self.lr = lr

    def compute_forward(self, feats):
        mask = (feats.sum(dim=2) != 0.0).float()
        outputs = self.modules(feats, mask)
        return self.log_softmax(outputs)

    def compute_objectives(self, predictions, emoid):
        return self.compute_cost(predictions, emoid)

    def check_gradients(self):
        for name, param in self.modules.named_parameters():
            if param.requires_grad and param.grad is not None:
                if not torch.isfinite(param.grad).all():
                    print(f"warning: non-finite gradient in {name}, skipping it")
                    param.grad = None
        if self.max_grad_norm > 0.0:
            torch.nn.utils.clip_grad_norm_(self.modules.parameters(), self.max_grad_norm)

    def fit_batch(self, feats, emoid):
        predictions = self.compute_forward(feats)
        loss = self.compute_objectives(predictions, emoid)
        loss.backward()
        if self.check_gradients():
            self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()

    def evaluate(self, loader):
        self.modules.eval()
        total, correct, loss_sum = 0, 0, 0.0
        with torch.no_grad():
            for _, feats, emo in loader:
                pred = self.compute_forward(feats)
                loss_sum += self.compute_objectives(pred, emo).item() * emo.numel()
                correct += (pred.argmax(dim=-1) == emo).sum().item()
                total += emo.numel()
        self.modules.train()
        return loss_sum / total, correct / total

    def fit(self, n_epochs, train_loader, valid_loader):
        for epoch in range(1, n_epochs + 1):
            self.modules.train()
            avg = 0.0
            for step, (_, feats, emo) in enumerate(train_loader, 1):
                loss = self.fit_batch(feats, emo)
                avg = avg + (loss.item() - avg) / step
            valid_loss, wa = self.evaluate(valid_loader)
            self.lr = self.lr * 0.9
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr
            print(f"epoch: {epoch}, lr: {self.lr:.2e} - train loss: {avg:.4f} - "
                  f"valid loss: {valid_loss:.4f}, valid wa: {wa:.4f}")


def main():
    class_means = torch.randn(len(EMOTIONS), FEAT_DIM) * 0.35
    train_set = EmoFeatDataset(480, class_means, seed=1)
    valid_set = EmoFeatDataset(160, class_means, seed=2)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True, collate_fn=collate)
    valid_loader = DataLoader(valid_set, batch_size=32, shuffle=False, collate_fn=collate)

    output_mlp = SuperbBaseModel(FEAT_DIM, len(EMOTIONS), HIDDEN)
    brain = EmoIdBrain(output_mlp, lr=1e-3)
    print(f"train utts: {len(train_set)}, valid utts: {len(valid_set)}, "
          f"chance: {1.0 / len(EMOTIONS):.2f}")
    brain.fit(6, train_loader, valid_loader)


if __name__ == "__main__":
    main()
