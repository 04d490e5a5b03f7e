"""Character-level CNN (Zhang et al. style) predicting the 1-10 rating of scraped user comments.

Comments and ratings are exported to a CSV file; texts are lower-cased, quantized into one-hot
characters (read backwards, padded/truncated to max_length) and classified by a small 1D CNN.
"""
import argparse
import csv
import os
import random
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789,;.!?:'\"/\\|_@#$%^&*~`+-=<>()[]{}"
POSITIVE = ["great", "loved", "amazing", "perfect", "excellent", "fantastic", "wonderful", "best"]
NEGATIVE = ["awful", "boring", "terrible", "waste", "worst", "bad", "horrible", "disappointing"]
NEUTRAL = ["the", "movie", "plot", "actors", "story", "it", "was", "and", "really", "a", "film",
           "ending", "music", "i", "think", "quite", "scenes"]


def scrape_comments(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["comment", "rating"])
        for _ in range(n):
            rating = rng.randint(1, 10)
            n_pos = max(0, rating - 4) // 2 + rng.randint(0, 1)
            n_neg = max(0, 6 - rating) // 2 + rng.randint(0, 1)
            words = ([rng.choice(POSITIVE) for _ in range(n_pos)] + [rng.choice(NEGATIVE) for _ in range(n_neg)]
                     + [rng.choice(NEUTRAL) for _ in range(rng.randint(6, 14))])
            rng.shuffle(words)
            writer.writerow([" ".join(words) + rng.choice(["!", ".", "..."]), f"{float(rating):.1f}"])


def get_sample_weights(labels):
    counter = Counter(labels)
    return np.array([1.0 / counter[l] for l in labels])


def load_data(args):
    texts, labels = [], []
    with open(args.data_path, newline="") as f:
        for row in csv.DictReader(f):
            text = row[args.text_column]
            if not text or not 5 < len(text) < 600:
                continue
            texts.append(text.lower())
            labels.append(float(row[args.label_column]))
    number_of_classes = len(set(labels))
    if number_of_classes > 2:
        labels = [label - 1 for label in labels]
    print(f"data loaded successfully with {len(texts)} rows and {number_of_classes} labels")
    return texts, labels, number_of_classes, get_sample_weights(labels)


class MyDataset(Dataset):
    def __init__(self, texts, labels, args):
        self.texts = texts
        self.labels = labels
        self.vocabulary = ALPHABET
        self.number_of_characters = len(ALPHABET)
        self.max_length = args.max_length
        self.identity_mat = np.identity(self.number_of_characters, dtype=np.float32)

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, index):
        raw_text = self.texts[index]
        data = np.array([self.identity_mat[self.vocabulary.index(i)] for i in list(raw_text)[::-1]
                         if i in self.vocabulary], dtype=np.float32)
        if len(data) > self.max_length:
            data = data[:self.max_length]
        elif len(data) < self.max_length:
            pad = np.zeros((self.max_length - len(data), self.number_of_characters), dtype=np.float32)
            data = np.concatenate((data, pad)) if len(data) else pad
        label = self.labels[index]
        return torch.Tensor(data), label


class CharacterLevelCNN(nn.Module):
    def __init__(self, args, number_of_classes):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv1d(len(ALPHABET), 64, 7), nn.ReLU(), nn.MaxPool1d(3))
        self.conv2 = nn.Sequential(nn.Conv1d(64, 64, 7), nn.ReLU(), nn.MaxPool1d(3))
        self.conv3 = nn.Sequential(nn.Conv1d(64, 64, 3), nn.ReLU())
        self.conv4 = nn.Sequential(nn.Conv1d(64, 64, 3), nn.ReLU(), nn.MaxPool1d(3))
        with torch.no_grad():
            out = self._features(torch.zeros(1, args.max_length, len(ALPHABET)))
        self.fc1 = nn.Sequential(nn.Linear(out.size(1), 256), nn.ReLU(), nn.Dropout(0.5))
        self.fc2 = nn.Linear(256, number_of_classes)

    def _features(self, x):
        x = x.transpose(1, 2)
        x = self.conv4(self.conv3(self.conv2(self.conv1(x))))
        return x.view(x.size(0), -1)

    def forward(self, x):
        return self.fc2(self.fc1(self._features(x)))


def train(model, loader, optimizer, criterion, epoch, log_every):
    model.train()
    losses, accuracies = [], []
    for iter, batch in enumerate(loader):
        features, labels = batch
        optimizer.zero_grad()
        predictions = model(features)
        loss = criterion(predictions, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accuracies.append((predictions.argmax(1) == labels).float().mean().item())
        if iter % log_every == 0:
            print(f"[Training - Epoch: {epoch}], Iteration: {iter}/{len(loader)}, "
                  f"Loss: {np.mean(losses):.4f}, Accuracy: {np.mean(accuracies):.4f}")
    return np.mean(losses), np.mean(accuracies)


def evaluate(model, loader, criterion):
    model.eval()
    losses, correct, total = [], 0, 0
    with torch.no_grad():
        for features, labels in loader:
            predictions = model(features)
            losses.append(criterion(predictions, labels).item())
            correct += (predictions.argmax(1) == labels).sum().item()
            total += len(labels)
    return np.mean(losses), correct / total


def run(args):
    torch.manual_seed(args.seed)
    texts, labels, number_of_classes, sample_weights = load_data(args)
    split = int(0.85 * len(texts))
    train_set = MyDataset(texts[:split], labels[:split], args)
    val_set = MyDataset(texts[split:], labels[split:], args)
    sampler = WeightedRandomSampler(sample_weights[:split], num_samples=split, replacement=True)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=2)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=2)

    model = CharacterLevelCNN(args, number_of_classes)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    for epoch in range(args.epochs):
        training_loss, training_accuracy = train(model, train_loader, optimizer, criterion, epoch, 10)
        validation_loss, validation_accuracy = evaluate(model, val_loader, criterion)
        print(f"[Epoch: {epoch}] train loss {training_loss:.4f} acc {training_accuracy:.4f} | "
              f"val loss {validation_loss:.4f} acc {validation_accuracy:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser("Character Based CNN for text classification")
    parser.add_argument("--data_path", type=str, default=None)
    parser.add_argument("--text_column", type=str, default="comment")
    parser.add_argument("--label_column", type=str, default="rating")
    parser.add_argument("--max_length", type=int, default=150)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.data_path is None:
            args.data_path = os.path.join(tmp, "comments.csv")
            scrape_comments(args.data_path, 2400, seed=args.seed)
        run(args)
