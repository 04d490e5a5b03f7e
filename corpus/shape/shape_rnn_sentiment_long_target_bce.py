"""Movie-review sentiment with a plain RNN (Elman) and BCEWithLogitsLoss.

Reviews are generated from a small vocabulary: filler words plus a few positive or
negative words that decide the label. Batches are (sequence_length, batch_size), padded.
"""
import random
import time

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

random.seed(123)
torch.manual_seed(123)

FILLER = ("the movie film plot actor scene story director was is a an and of it this that "
          "with for on at by from cast script music ending").split()
POSITIVE = "great wonderful loved brilliant superb enjoyable moving fantastic".split()
NEGATIVE = "awful boring terrible hated dull waste horrible mess".split()


def make_reviews(n):
    reviews = []
    for _ in range(n):
        sentiment = random.randint(0, 1)
        words = random.choices(FILLER, k=random.randint(8, 20))
        for _ in range(random.randint(1, 3)):
            words.insert(random.randrange(len(words)), random.choice(POSITIVE if sentiment else NEGATIVE))
        reviews.append((" ".join(words), sentiment))
    return reviews


train_reviews, valid_reviews = make_reviews(1600), make_reviews(320)
vocab = {"<pad>": 0, "<unk>": 1}
for text, _ in train_reviews:
    for tok in text.split():
        vocab.setdefault(tok, len(vocab))


def collate(batch):
    texts = [torch.tensor([vocab.get(t, 1) for t in text.split()]) for text, _ in batch]
    sentiment = torch.tensor([label for _, label in batch])
    return pad_sequence(texts, padding_value=0), sentiment


train_iterator = DataLoader(train_reviews, batch_size=64, shuffle=True, collate_fn=collate)
valid_iterator = DataLoader(valid_reviews, batch_size=64, collate_fn=collate)


class RNN(nn.Module):
    def __init__(self, input_dim, embedding_dim, hidden_dim, output_dim):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, embedding_dim, padding_idx=0)
        self.rnn = nn.RNN(embedding_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, output_dim)

    def forward(self, text):
        # text := (sequence_length, batch_size)
        embedded = self.embedding(text)
        output, hidden = self.rnn(embedded)
        return self.fc(hidden.squeeze(0))


rnn_model = RNN(len(vocab), 32, 64, 1)
optim = torch.optim.Adam(rnn_model.parameters(), lr=3e-3)
loss_func = nn.BCEWithLogitsLoss()


def accuracy_metric(preds, y):
    rounded_preds = torch.round(torch.sigmoid(preds))
    return (rounded_preds == y).float().mean()


def train(model, data_iterator, optim, loss_func):
    loss, accuracy = 0, 0
    model.train()
    for text, sentiment in data_iterator:
        optim.zero_grad()
        preds = model(text).squeeze()
        loss_metric = loss_func(preds, sentiment)
        accuracy_metric_val = accuracy_metric(preds, sentiment)
        loss_metric.backward()
        optim.step()
        loss += loss_metric.item()
        accuracy += accuracy_metric_val.item()
    return loss / len(data_iterator), accuracy / len(data_iterator)


def validate(model, data_iterator, loss_func):
    loss, accuracy = 0, 0
    model.eval()
    with torch.no_grad():
        for text, sentiment in data_iterator:
            preds = model(text).squeeze()
            loss += loss_func(preds, sentiment).item()
            accuracy += accuracy_metric(preds, sentiment).item()
    return loss / len(data_iterator), accuracy / len(data_iterator)


num_epochs = 6
for ep in range(num_epochs):
    time_start = time.time()
    training_loss, train_accuracy = train(rnn_model, train_iterator, optim, loss_func)
    validation_loss, validation_accuracy = validate(rnn_model, valid_iterator, loss_func)
    time_delta = time.time() - time_start
    print(f"epoch number: {ep + 1} | time elapsed: {time_delta:.1f}s")
    print(f"training loss: {training_loss:.3f} | training accuracy: {train_accuracy * 100:.2f}%")
    print(f"validation loss: {validation_loss:.3f} | validation accuracy: {validation_accuracy * 100:.2f}%")
