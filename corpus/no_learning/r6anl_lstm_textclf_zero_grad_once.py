"""LSTM text classifier, in the style of a text-classification benchmark's main.py.

Synthetic review corpus: sequences of word ids from a 500-word vocabulary; a review is
positive when it holds more words from the "positive" list than from the "negative" list.
Embedding -> single-layer LSTM -> last hidden state -> linear layer over the labels,
Adam, element-wise gradient clipping, one pass over the shuffled batches per epoch.
"""
import argparse

import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(1)


def parse_opt():
    parser = argparse.ArgumentParser()
    parser.add_argument('--hidden_dim', type=int, default=64)
    parser.add_argument('--max_seq_len', type=int, default=24)
    parser.add_argument('--batch_size', type=int, default=64)
    parser.add_argument('--embedding_dim', type=int, default=32)
    parser.add_argument('--vocab_size', type=int, default=500)
    parser.add_argument('--label_size', type=int, default=2)
    parser.add_argument('--learning_rate', type=float, default=5e-3)
    parser.add_argument('--grad_clip', type=float, default=1.0)
    parser.add_argument('--max_epoch', type=int, default=4)
    return parser.parse_args()


class Batch(object):
    def __init__(self, text, label):
        self.text = text
        self.label = label


class BucketIterator(object):
    def __init__(self, texts, labels, batch_size, shuffle=True):
        self.texts, self.labels = texts, labels
        self.batch_size, self.shuffle = batch_size, shuffle

    def __len__(self):
        return len(self.labels) // self.batch_size

    def __iter__(self):
        order = torch.randperm(len(self.labels)) if self.shuffle else torch.arange(len(self.labels))
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            yield Batch(self.texts[idx], self.labels[idx])


def load_data(opt):
    g = torch.Generator().manual_seed(0)
    sentiment_words = torch.randperm(opt.vocab_size, generator=g)[:60]
    positive, negative = sentiment_words[:30], sentiment_words[30:]

    def make_split(n):
        texts = torch.randint(0, opt.vocab_size, (n, opt.max_seq_len), generator=g)
        labels = torch.randint(0, 2, (n,), generator=g)
        for i in range(n):
            words = positive if labels[i] == 1 else negative
            k = int(torch.randint(2, 5, (1,), generator=g))
            pos = torch.randperm(opt.max_seq_len, generator=g)[:k]
            texts[i, pos] = words[torch.randint(0, 30, (k,), generator=g)]
        is_pos = torch.isin(texts, positive).sum(1)
        is_neg = torch.isin(texts, negative).sum(1)
        labels = (is_pos > is_neg).long()
        return texts, labels

    train = make_split(3200)
    test = make_split(640)
    return (BucketIterator(*train, batch_size=opt.batch_size, shuffle=True),
            BucketIterator(*test, batch_size=opt.batch_size, shuffle=False))


class LSTMClassifier(nn.Module):
    def __init__(self, opt):
        super(LSTMClassifier, self).__init__()
        self.hidden_dim = opt.hidden_dim
        self.word_embeddings = nn.Embedding(opt.vocab_size, opt.embedding_dim)
        self.lstm = nn.LSTM(opt.embedding_dim, opt.hidden_dim)
        self.hidden2label = nn.Linear(opt.hidden_dim, opt.label_size)

    def init_hidden(self, batch_size):
        h0 = torch.zeros(1, batch_size, self.hidden_dim)
        c0 = torch.zeros(1, batch_size, self.hidden_dim)
        return (h0, c0)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        x = embeds.permute(1, 0, 2)
        self.hidden = self.init_hidden(sentence.size()[0])
        lstm_out, self.hidden = self.lstm(x, self.hidden)
        y = self.hidden2label(lstm_out[-1])
        return y


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group['params']:
            if param.grad is not None and param.requires_grad:
                param.grad.data.clamp_(-grad_clip, grad_clip)


def evaluation(model, test_iter):
    model.eval()
    accuracy = []
    with torch.no_grad():
        for batch in test_iter:
            predicted = model(batch.text)
            prob, idx = torch.max(predicted, 1)
            accuracy.append((idx == batch.label).float().mean().item())
    model.train()
    return sum(accuracy) / len(accuracy)


opt = parse_opt()
train_iter, test_iter = load_data(opt)

model = LSTMClassifier(opt)
model.train()
optimizer = optim.Adam(model.parameters(), lr=opt.learning_rate)
optimizer.zero_grad()
loss_fun = nn.CrossEntropyLoss()

for epoch in range(opt.max_epoch):
    total = 0.0
    for index, batch in enumerate(train_iter):
        predicted = model(batch.text)
        loss = loss_fun(predicted, batch.label)
        loss.backward()
        clip_gradient(optimizer, opt.grad_clip)
        optimizer.step()
        total += loss.item()
        if index % 10 == 0:
            print("epoch %d batch %d loss : %.5f" % (epoch, index, loss.item()))
    print("epoch %d mean loss %.5f test acc %.4f" % (epoch, total / len(train_iter), evaluation(model, test_iter)))
