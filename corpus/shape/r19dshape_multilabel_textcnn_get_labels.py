"""Multi-label text classification with a TextCNN, set up like the Bert-Multi-Label-Text-
Classification project (processor -> examples -> features, a BCEWithLogLoss criterion, a Trainer
with train/valid epochs and AUC / F1 metrics), moved from the toxic-comments data to our own
support-ticket data: each ticket carries one or more of 15 topic tags.

The tickets are synthetic (a topic keyword vocabulary mixed with background words) and are written
to train.csv in a temporary directory, one 0/1 column per tag; the last 400 rows are held out.
"""
import csv
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)
np.random.seed(42)

TAGS = ["billing", "refund", "login", "password", "shipping", "delivery_delay", "damaged_item",
        "invoice", "subscription", "cancellation", "app_crash", "payment_failed", "account_locked",
        "address_change", "feedback"]
VOCAB_SIZE = 1500
MAX_LEN = 48
BATCH_SIZE = 32
EPOCHS = 4


def write_ticket_csv(path, n_rows, rng):
    keywords = rng.choice(np.arange(2, VOCAB_SIZE), size=(len(TAGS), 25), replace=False)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "comment_text"] + TAGS)
        for i in range(n_rows):
            n_tags = rng.choice([1, 2, 3], p=[0.5, 0.35, 0.15])
            tags = rng.choice(len(TAGS), size=n_tags, replace=False)
            length = rng.integers(20, MAX_LEN + 1)
            words = []
            for _ in range(length):
                if rng.random() < 0.4:
                    words.append(int(rng.choice(keywords[rng.choice(tags)])))
                else:
                    words.append(int(rng.integers(2, VOCAB_SIZE)))
            row = [i, " ".join(f"w{w}" for w in words)] + [int(t in tags) for t in range(len(TAGS))]
            writer.writerow(row)


class BertProcessor:
    def get_labels(self):
        """Gets the list of labels for this data set."""
        return ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]

    def read_data(self, path):
        with open(path) as f:
            reader = csv.reader(f)
            header = next(reader)
            rows = list(reader)
        texts = [r[1] for r in rows]
        labels = [[int(v) for v in r[2:]] for r in rows]
        return texts, labels

    def create_features(self, texts, labels):
        ids = np.zeros((len(texts), MAX_LEN), dtype=np.int64)
        for i, text in enumerate(texts):
            tokens = [int(w[1:]) for w in text.split()][:MAX_LEN]
            ids[i, :len(tokens)] = tokens
        return TensorDataset(torch.from_numpy(ids), torch.tensor(labels, dtype=torch.float32))


class TextCNN(nn.Module):
    def __init__(self, vocab_size, num_labels, embed_dim=64, n_filters=48, kernel_sizes=(2, 3, 4)):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(embed_dim, n_filters, k) for k in kernel_sizes])
        self.dropout = nn.Dropout(0.3)
        self.classifier = nn.Linear(n_filters * len(kernel_sizes), num_labels)

    def forward(self, input_ids):
        x = self.embedding(input_ids).transpose(1, 2)
        pooled = [F.relu(conv(x)).max(dim=2).values for conv in self.convs]
        return self.classifier(self.dropout(torch.cat(pooled, dim=1)))


class BCEWithLogLoss:
    def __init__(self):
        self.loss_fn = nn.BCEWithLogitsLoss()

    def __call__(self, output, target):
        loss = self.loss_fn(input=output, target=target)
        return loss


def auc_per_label(y_true, y_score):
    aucs = []
    for j in range(y_true.shape[1]):
        t, s = y_true[:, j], y_score[:, j]
        n_pos, n_neg = t.sum(), len(t) - t.sum()
        if n_pos == 0 or n_neg == 0:
            continue
        ranks = np.empty(len(s))
        ranks[np.argsort(s)] = np.arange(1, len(s) + 1)
        aucs.append((ranks[t == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(aucs))


def f1_micro(y_true, y_pred):
    tp = (y_true * y_pred).sum()
    return 2 * tp / (y_true.sum() + y_pred.sum() + 1e-9)


class Trainer:
    def __init__(self, model, criterion, optimizer):
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer

    def train_epoch(self, data, epoch):
        self.model.train()
        total, n = 0.0, 0
        for step, (input_ids, label_ids) in enumerate(data):
            logits = self.model(input_ids)
            loss = self.criterion(output=logits, target=label_ids)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item() * len(input_ids)
            n += len(input_ids)
            if step % 25 == 0:
                print(f"epoch {epoch} step {step:3d}  loss {loss.item():.4f}")
        return total / n

    def valid_epoch(self, data):
        self.model.eval()
        scores, targets = [], []
        with torch.no_grad():
            for input_ids, label_ids in data:
                scores.append(torch.sigmoid(self.model(input_ids)).numpy())
                targets.append(label_ids.numpy())
        scores, targets = np.concatenate(scores), np.concatenate(targets)
        return auc_per_label(targets, scores), f1_micro(targets, (scores > 0.5).astype(np.float32))

    def train(self, train_data, valid_data, epochs):
        for epoch in range(epochs):
            train_loss = self.train_epoch(train_data, epoch)
            valid_auc, valid_f1 = self.valid_epoch(valid_data)
            print(f"Epoch {epoch + 1}/{epochs} - loss: {train_loss:.4f} - "
                  f"valid_auc: {valid_auc:.4f} - valid_f1: {valid_f1:.4f}")


with tempfile.TemporaryDirectory() as data_dir:
    rng = np.random.default_rng(0)
    write_ticket_csv(os.path.join(data_dir, "train.csv"), 2400, rng)
    processor = BertProcessor()
    train_texts, train_labels = processor.read_data(os.path.join(data_dir, "train.csv"))
    valid_texts, valid_labels = train_texts[2000:], train_labels[2000:]
    train_texts, train_labels = train_texts[:2000], train_labels[:2000]

label_list = processor.get_labels()
print(f"train {len(train_texts)} tickets, valid {len(valid_texts)}, num_labels {len(label_list)}")
train_dataset = processor.create_features(train_texts, train_labels)
valid_dataset = processor.create_features(valid_texts, valid_labels)
train_dataloader = DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True)
valid_dataloader = DataLoader(valid_dataset, batch_size=256)

model = TextCNN(VOCAB_SIZE, num_labels=len(label_list))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
trainer = Trainer(model, criterion=BCEWithLogLoss(), optimizer=optimizer)
trainer.train(train_data=train_dataloader, valid_data=valid_dataloader, epochs=EPOCHS)
