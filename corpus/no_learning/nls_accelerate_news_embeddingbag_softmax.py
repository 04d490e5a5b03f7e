"""News headline classification (10 categories) with an EmbeddingBag model and accelerate.

The headlines are generated from per-category keyword lists mixed with common
words; the category sizes are unbalanced, as in the real news dump.
"""
import argparse
import random

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

labels = ['sports', 'entertainment', 'home', 'realestate', 'education', 'fashion', 'politics', 'games', 'tech', 'finance']
num_labels = len(labels)


def build_corpus(n, vocab_size=3000, seed=0):
    rng = random.Random(seed)
    common = list(range(1, 1000))
    keywords = [list(range(1000 + 200 * c, 1000 + 200 * (c + 1))) for c in range(num_labels)]
    weights = [6, 4, 3, 3, 2, 2, 2, 1, 1, 1]
    texts, targets = [], []
    for _ in range(n):
        c = rng.choices(range(num_labels), weights=weights)[0]
        length = rng.randint(8, 20)
        n_key = max(1, length // 4)
        toks = rng.sample(common, length - n_key) + rng.sample(keywords[c], n_key)
        rng.shuffle(toks)
        texts.append(toks)
        targets.append(c)
    return texts, targets


class NewsDataset(Dataset):
    def __init__(self, texts, targets):
        self.texts = texts
        self.targets = targets

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.texts[idx], self.targets[idx]


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for text, label in batch:
        label_list.append(label)
        text_list.append(torch.tensor(text, dtype=torch.long))
        offsets.append(len(text))
    return {
        "input_ids": torch.cat(text_list),
        "offsets": torch.tensor(offsets[:-1]).cumsum(dim=0),
        "labels": torch.tensor(label_list, dtype=torch.long),
    }


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, mode="mean")
        self.classifier = nn.Linear(embed_dim, num_class)
        self.softmax = nn.functional.softmax

    def forward(self, input_ids, offsets):
        embedded = self.embedding(input_ids, offsets)
        logits = self.classifier(embedded)
        return self.softmax(logits, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--embed_dim", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)

    texts, targets = build_corpus(2400)
    train_data = NewsDataset(texts[:2000], targets[:2000])
    valid_data = NewsDataset(texts[2000:], targets[2000:])
    train_dataloader = DataLoader(train_data, batch_size=args.batch_size, shuffle=True, collate_fn=collate_batch)
    valid_dataloader = DataLoader(valid_data, batch_size=100, shuffle=False, collate_fn=collate_batch)

    model = TextClassifier(3000, args.embed_dim, num_labels)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    model, optimizer, train_dataloader, valid_dataloader = accelerator.prepare(
        model, optimizer, train_dataloader, valid_dataloader)

    for epoch in range(1, args.epochs + 1):
        model.train()
        losses, accuracy = 0.0, 0.0
        for batch_index, batch in enumerate(train_dataloader):
            output = model(batch["input_ids"], batch["offsets"])
            loss = criterion(output, batch["labels"])
            losses += loss.item()
            pred_labels = torch.argmax(output, dim=1)
            acc = torch.sum(pred_labels == batch["labels"]).item() / len(pred_labels)
            accuracy += acc

            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()

            if (batch_index + 1) % 20 == 0:
                accelerator.print('Epoch: %d | Batch: %d / %d | Acc: %f | Loss: %f' % (
                    epoch, batch_index + 1, len(train_dataloader), acc, loss.item()))

        accelerator.print('\tTrain ACC: %.4f\tLoss: %.4f' % (accuracy / len(train_dataloader), losses / len(train_dataloader)))

        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for batch in valid_dataloader:
                output = model(batch["input_ids"], batch["offsets"])
                correct += (output.argmax(dim=1) == batch["labels"]).sum().item()
                total += len(batch["labels"])
        accelerator.print('\tValid ACC: %.4f' % (correct / total))


if __name__ == "__main__":
    main()
