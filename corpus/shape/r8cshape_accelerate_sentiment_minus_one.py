"""Three-way sentiment classification of short product reviews, trained with accelerate.

The reviews come as a CSV export from the annotation tool (columns: text, label; the
annotators marked every review as negative, neutral or positive). A whitespace vocabulary is
built from the training split and a bag-of-embeddings classifier is trained on the CPU.
"""
import csv
import os
import random
import tempfile
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)

POSITIVE = ["great", "excellent", "love", "perfect", "amazing", "sturdy", "recommend", "happy"]
NEGATIVE = ["broken", "terrible", "refund", "awful", "cheap", "disappointed", "useless", "worst"]
NEUTRAL = ["okay", "average", "fine", "expected", "decent", "standard", "normal", "adequate"]
FILLER = ["the", "a", "it", "this", "product", "was", "is", "and", "for", "my", "with", "item",
          "delivery", "box", "price", "quality", "after", "week", "use", "really"]
SENTIMENT = {"negative": -1, "neutral": 0, "positive": 1}


def export_reviews(path, n):
    words = {"negative": NEGATIVE, "neutral": NEUTRAL, "positive": POSITIVE}
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for _ in range(n):
            name = random.choice(list(SENTIMENT))
            tokens = random.choices(FILLER, k=random.randint(6, 14))
            tokens += random.choices(words[name], k=random.randint(1, 3))
            if random.random() < 0.3:
                tokens += random.choices(NEGATIVE + NEUTRAL + POSITIVE, k=1)
            random.shuffle(tokens)
            writer.writerow([" ".join(tokens), SENTIMENT[name]])


class ReviewDataset(Dataset):
    def __init__(self, csv_path, vocab=None):
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        self.texts = [row["text"].split() for row in rows]
        self.labels = [int(row["label"]) for row in rows]
        if vocab is None:
            counts = Counter(tok for text in self.texts for tok in text)
            vocab = {"<unk>": 0}
            for tok, _ in counts.most_common():
                vocab[tok] = len(vocab)
        self.vocab = vocab

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        ids = [self.vocab.get(tok, 0) for tok in self.texts[idx]]
        return torch.tensor(ids, dtype=torch.long), self.labels[idx]


def collate_batch(batch):
    ids = [item[0] for item in batch]
    offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
    labels = torch.tensor([item[1] for item in batch], dtype=torch.long)
    return torch.cat(ids), offsets, labels


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_labels):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, mode="mean")
        self.fc1 = nn.Linear(embed_dim, 64)
        self.fc2 = nn.Linear(64, num_labels)

    def forward(self, token_ids, offsets):
        h = self.embedding(token_ids, offsets)
        return self.fc2(F.relu(self.fc1(h)))


def main():
    accelerator = Accelerator(cpu=True)
    with tempfile.TemporaryDirectory() as data_dir:
        train_csv = os.path.join(data_dir, "train.csv")
        eval_csv = os.path.join(data_dir, "eval.csv")
        export_reviews(train_csv, 3000)
        export_reviews(eval_csv, 600)
        train_ds = ReviewDataset(train_csv)
        eval_ds = ReviewDataset(eval_csv, vocab=train_ds.vocab)

    num_labels = len(SENTIMENT)
    accelerator.print(f"{len(train_ds)} training reviews, vocabulary of {len(train_ds.vocab)} words, "
                      f"{num_labels} labels")
    train_loader = DataLoader(train_ds, batch_size=32, shuffle=True, collate_fn=collate_batch)
    eval_loader = DataLoader(eval_ds, batch_size=64, collate_fn=collate_batch)

    model = TextClassifier(len(train_ds.vocab), 64, num_labels)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer, train_loader, eval_loader = accelerator.prepare(
        model, optimizer, train_loader, eval_loader)

    for epoch in range(3):
        model.train()
        total_loss = 0.0
        for step, (token_ids, offsets, labels) in enumerate(train_loader):
            logits = model(token_ids, offsets)
            loss = F.cross_entropy(logits, labels)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            total_loss += loss.item()
            if step % 20 == 0:
                accelerator.print(f"epoch {epoch} step {step:3d} loss {loss.item():.4f}")

        model.eval()
        correct, seen = 0, 0
        with torch.no_grad():
            for token_ids, offsets, labels in eval_loader:
                preds = model(token_ids, offsets).argmax(-1)
                correct += (preds == labels).sum().item()
                seen += labels.numel()
        accelerator.print(f"epoch {epoch}: train loss {total_loss / len(train_loader):.4f} "
                          f"eval accuracy {correct / seen:.3f}")


if __name__ == "__main__":
    main()
