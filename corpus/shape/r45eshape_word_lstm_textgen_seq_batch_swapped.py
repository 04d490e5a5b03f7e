"""Word-level LSTM text generator (after the closeheat "LSTM text generation" tutorial).

Trains on a small synthetic joke corpus: every window of `sequence_length` words predicts
the same window shifted by one word, then samples a few words from the model.
"""
import argparse
import random
from collections import Counter

import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import DataLoader

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)


def make_corpus(n_words, vocab_size=30, noise=0.05, seed=0):
    rng = np.random.RandomState(seed)
    vocab = ["w%02d" % i for i in range(vocab_size)]
    table = rng.randint(0, vocab_size, size=(vocab_size, vocab_size))
    ids = [rng.randint(vocab_size), rng.randint(vocab_size)]
    while len(ids) < n_words:
        if rng.rand() < noise:
            ids.append(rng.randint(vocab_size))
        else:
            ids.append(int(table[ids[-2], ids[-1]]))
    return [vocab[i] for i in ids]


class Dataset(torch.utils.data.Dataset):
    def __init__(self, args, words, uniq_words=None):
        self.args = args
        self.words = words
        self.uniq_words = uniq_words or self.get_uniq_words()
        self.index_to_word = {index: word for index, word in enumerate(self.uniq_words)}
        self.word_to_index = {word: index for index, word in enumerate(self.uniq_words)}
        self.words_indexes = [self.word_to_index[w] for w in self.words]

    def get_uniq_words(self):
        word_counts = Counter(self.words)
        return sorted(word_counts, key=word_counts.get, reverse=True)

    def __len__(self):
        return len(self.words_indexes) - self.args.sequence_length

    def __getitem__(self, index):
        return (
            torch.tensor(self.words_indexes[index:index + self.args.sequence_length]),
            torch.tensor(self.words_indexes[index + 1:index + self.args.sequence_length + 1]),
        )


class Model(nn.Module):
    def __init__(self, dataset):
        super(Model, self).__init__()
        self.lstm_size = 64
        self.embedding_dim = 64
        self.num_layers = 2

        n_vocab = len(dataset.uniq_words)
        self.embedding = nn.Embedding(
            num_embeddings=n_vocab,
            embedding_dim=self.embedding_dim,
        )
        self.lstm = nn.LSTM(
            input_size=self.lstm_size,
            hidden_size=self.lstm_size,
            num_layers=self.num_layers,
            dropout=0.2,
        )
        self.fc = nn.Linear(self.lstm_size, n_vocab)

    def forward(self, x):
        embed = self.embedding(x)
        output, state = self.lstm(embed)
        logits = self.fc(output)
        return logits, state


def evaluate(dataset, model, args):
    model.eval()
    loader = DataLoader(dataset, batch_size=args.batch_size)
    criterion = nn.CrossEntropyLoss()
    total, correct, loss_sum, n = 0, 0, 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            y_pred, _ = model(x)
            loss_sum += criterion(y_pred.transpose(1, 2), y).item() * x.size(0)
            n += x.size(0)
            correct += (y_pred.argmax(-1) == y).sum().item()
            total += y.numel()
    model.train()
    return loss_sum / n, correct / total


def predict(dataset, model, text, next_words=8):
    words = text.split(' ')
    model.eval()
    with torch.no_grad():
        for i in range(0, next_words):
            x = torch.tensor([[dataset.word_to_index[w] for w in words[-4:]]])
            y_pred, _ = model(x)
            last_word_logits = y_pred[0][-1]
            p = torch.nn.functional.softmax(last_word_logits, dim=0).numpy()
            p = p / p.sum()
            word_index = np.random.choice(len(last_word_logits), p=p)
            words.append(dataset.index_to_word[word_index])
    model.train()
    return words


def train(dataset, val_dataset, model, args):
    model.train()

    dataloader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
    )

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    for epoch in range(args.max_epochs):
        for batch, (x, y) in enumerate(dataloader):
            optimizer.zero_grad()

            y_pred, _ = model(x)
            loss = criterion(y_pred.transpose(1, 2), y)

            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print({'epoch': epoch, 'step': step, 'loss': round(loss.item(), 4)})

        val_loss, val_acc = evaluate(val_dataset, model, args)
        print({'epoch': epoch, 'val_loss': round(val_loss, 4), 'val_next_word_acc': round(val_acc, 4)})
        print(' '.join(predict(dataset, model, text=' '.join(dataset.words[:4]))))


parser = argparse.ArgumentParser()
parser.add_argument('--max-epochs', type=int, default=3)
parser.add_argument('--batch-size', type=int, default=128)
parser.add_argument('--sequence-length', type=int, default=4)
parser.add_argument('--lr', type=float, default=0.005)
args = parser.parse_args()

words = make_corpus(7000)
dataset = Dataset(args, words[:6000])
val_dataset = Dataset(args, words[6000:], uniq_words=dataset.uniq_words)
model = Model(dataset)
print('vocab', len(dataset.uniq_words), 'train windows', len(dataset), 'batches/epoch', len(dataset) // args.batch_size + 1)

train(dataset, val_dataset, model, args)
