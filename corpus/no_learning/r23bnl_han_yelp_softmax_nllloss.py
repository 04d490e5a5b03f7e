"""Hierarchical Attention Network (Yang et al. 2016) for document classification.

Word-level bidirectional GRU + attention builds a vector per sentence, a sentence-level
bidirectional GRU + attention builds the document vector, and a linear layer scores the
classes. Trained with NLLLoss and SGD + momentum on class-balanced mini-batches.

The "reviews" are generated here: every class has a few topic words that are sprinkled
into otherwise random sentences.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

NUM_CLASSES = 29
VOCAB = 400
SENTS = 5
WORDS = 10


class AttentionPool(nn.Module):
    def __init__(self, hid):
        super().__init__()
        self.proj = nn.Linear(hid, hid)
        self.context = nn.Linear(hid, 1, bias=False)

    def forward(self, h):
        u = torch.tanh(self.proj(h))
        a = F.softmax(self.context(u), dim=1)
        return (a * h).sum(dim=1)


class HAN(nn.Module):
    def __init__(self, vocab_size, embedsize, hid_size, n_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embedsize, padding_idx=0)
        self.word_gru = nn.GRU(embedsize, hid_size, batch_first=True, bidirectional=True)
        self.word_attn = AttentionPool(2 * hid_size)
        self.sent_gru = nn.GRU(2 * hid_size, hid_size, batch_first=True, bidirectional=True)
        self.sent_attn = AttentionPool(2 * hid_size)
        self.final_linear = nn.Linear(2 * hid_size, n_classes)

    def forward(self, docs):
        b, s, w = docs.shape
        words = self.embed(docs.view(b * s, w))
        h_words, _ = self.word_gru(words)
        sent_vecs = self.word_attn(h_words).view(b, s, -1)
        h_sents, _ = self.sent_gru(sent_vecs)
        doc_vec = self.sent_attn(h_sents)
        y_pred = self.final_linear(doc_vec)
        return F.softmax(y_pred, dim=1)


def make_reviews(n, seed):
    g = np.random.RandomState(seed)
    topic_words = np.arange(1, 1 + NUM_CLASSES * 4).reshape(NUM_CLASSES, 4)
    labels = g.randint(0, NUM_CLASSES, size=n)
    docs = g.randint(1 + NUM_CLASSES * 4, VOCAB, size=(n, SENTS, WORDS))
    for i, c in enumerate(labels):
        for s in range(SENTS):
            if g.rand() < 0.9:
                pos = g.randint(0, WORDS, size=3)
                docs[i, s, pos] = g.choice(topic_words[c], size=3)
    return docs.tolist(), labels.tolist()


def gen_batch(x, y, batch_size):
    j = random.randint(0, len(x) - 1)
    k = [0] * NUM_CLASSES
    x_batch, y_batch = [], []
    while sum(k) < batch_size:
        if k[y[j]] <= int(batch_size / NUM_CLASSES + 1):
            k[y[j]] += 1
            x_batch.append(x[j])
            y_batch.append(y[j])
        j = (j + 1) % len(x)
    return torch.LongTensor(x_batch), torch.LongTensor(y_batch)


def train_data(review, targets, model, optimizer, criterion):
    optimizer.zero_grad()
    y_pred = model(review)
    loss = criterion(y_pred, targets)
    acc = (y_pred.max(dim=1)[1] == targets).float().mean().item()
    loss.backward()
    optimizer.step()
    return loss.item(), acc


def validation_accuracy(x_val, y_val, model, criterion):
    model.eval()
    with torch.no_grad():
        x, y = torch.LongTensor(x_val), torch.LongTensor(y_val)
        y_pred = model(x)
        acc = (y_pred.max(dim=1)[1] == y).float().mean().item()
    model.train()
    return acc


def main():
    batch_size = 32
    x_train, y_train = make_reviews(2400, seed=1)
    x_val, y_val = make_reviews(600, seed=2)

    model = HAN(VOCAB, embedsize=32, hid_size=32, n_classes=NUM_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.NLLLoss()

    steps_per_epoch = len(x_train) // batch_size // 3
    for epoch in range(1, 9):
        losses, accs = [], []
        for j in range(steps_per_epoch):
            x, y = gen_batch(x_train, y_train, batch_size)
            loss, acc = train_data(x, y, model, optimizer, criterion)
            losses.append(loss)
            accs.append(acc)
        val_acc = validation_accuracy(x_val, y_val, model, criterion)
        print("Epoch %d: loss %.4f, train acc %.3f, val acc %.3f"
              % (epoch, np.mean(losses), np.mean(accs), val_acc))


if __name__ == "__main__":
    main()
