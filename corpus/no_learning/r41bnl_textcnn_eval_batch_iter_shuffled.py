#! /usr/bin/env python
"""Sentence polarity classification with a Kim-style TextCNN (embedding, conv filters of
widths 3/4/5 with max-over-time pooling, dropout, linear layer), ported from the
cnn-text-classification train.py / eval.py scripts to PyTorch.

Offline stand-in for the pos.txt / neg.txt reviews: tokenised sentences generated from
a small vocabulary where a set of positive and negative words decides the polarity."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--dev_sample_percentage", type=float, default=.1)
parser.add_argument("--embedding_dim", type=int, default=128)
parser.add_argument("--filter_sizes", type=str, default="3,4,5")
parser.add_argument("--num_filters", type=int, default=64)
parser.add_argument("--dropout_keep_prob", type=float, default=0.5)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--num_epochs", type=int, default=4)
parser.add_argument("--evaluate_every", type=int, default=40)
FLAGS = parser.parse_args()

VOCAB = 2000
POS_WORDS = np.arange(10, 60)
NEG_WORDS = np.arange(60, 110)


def load_data_and_labels(n, rng):
    """Positive reviews first, then negative ones, as in pos.txt + neg.txt."""
    sentences, labels = [], []
    for polarity in (1, 0):
        for _ in range(n // 2):
            length = rng.randint(12, 40)
            words = rng.randint(110, VOCAB, size=length)
            k = rng.randint(2, 5)
            pos = rng.choice(length, size=k, replace=False)
            words[pos] = rng.choice(POS_WORDS if polarity == 1 else NEG_WORDS, size=k)
            sentences.append(list(words))
            labels.append([0, 1] if polarity == 1 else [1, 0])
    return sentences, np.array(labels)


def pad_sentences(sentences, sequence_length, padding_word=0):
    return np.array([s + [padding_word] * (sequence_length - len(s)) for s in sentences])


def batch_iter(data, batch_size, num_epochs, shuffle=True):
    """
    Generates a batch iterator for a dataset.
    """
    data = np.array(data, dtype=object) if isinstance(data[0], tuple) else np.array(data)
    data_size = len(data)
    num_batches_per_epoch = int((len(data) - 1) / batch_size) + 1
    for epoch in range(num_epochs):
        # Shuffle the data at each epoch
        if shuffle:
            shuffle_indices = np.random.permutation(np.arange(data_size))
            shuffled_data = data[shuffle_indices]
        else:
            shuffled_data = data
        for batch_num in range(num_batches_per_epoch):
            start_index = batch_num * batch_size
            end_index = min((batch_num + 1) * batch_size, data_size)
            yield shuffled_data[start_index:end_index]


class TextCNN(nn.Module):
    def __init__(self, sequence_length, num_classes, vocab_size, embedding_size, filter_sizes, num_filters):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        nn.init.uniform_(self.embedding.weight, -1.0, 1.0)
        self.convs = nn.ModuleList([nn.Conv1d(embedding_size, num_filters, fs) for fs in filter_sizes])
        self.dropout = nn.Dropout(1 - FLAGS.dropout_keep_prob)
        self.output = nn.Linear(num_filters * len(filter_sizes), num_classes)

    def forward(self, input_x):
        embedded = self.embedding(input_x).transpose(1, 2)
        pooled = [F.relu(conv(embedded)).max(dim=2).values for conv in self.convs]
        h_pool = torch.cat(pooled, dim=1)
        scores = self.output(self.dropout(h_pool))
        return scores


def main():
    torch.manual_seed(0)
    rng = np.random.RandomState(1)

    # Load data
    print("Loading data...")
    x_text, y = load_data_and_labels(3000, rng)
    x_raw_test, y_test = load_data_and_labels(1000, rng)
    max_document_length = 40
    x = pad_sentences(x_text, max_document_length)
    x_test = pad_sentences(x_raw_test, max_document_length)
    y_test = np.argmax(y_test, axis=1)

    # Randomly shuffle data
    np.random.seed(10)
    shuffle_indices = np.random.permutation(np.arange(len(y)))
    x_shuffled = x[shuffle_indices]
    y_shuffled = y[shuffle_indices]

    # Split train/dev set
    dev_sample_index = -1 * int(FLAGS.dev_sample_percentage * float(len(y)))
    x_train, x_dev = x_shuffled[:dev_sample_index], x_shuffled[dev_sample_index:]
    y_train, y_dev = y_shuffled[:dev_sample_index], y_shuffled[dev_sample_index:]
    print("Vocabulary Size: {:d}".format(VOCAB))
    print("Train/Dev/Test split: {:d}/{:d}/{:d}".format(len(y_train), len(y_dev), len(y_test)))

    cnn = TextCNN(sequence_length=x_train.shape[1], num_classes=y_train.shape[1], vocab_size=VOCAB,
                  embedding_size=FLAGS.embedding_dim,
                  filter_sizes=list(map(int, FLAGS.filter_sizes.split(","))),
                  num_filters=FLAGS.num_filters)
    optimizer = torch.optim.Adam(cnn.parameters(), lr=1e-3)

    def train_step(x_batch, y_batch, step):
        cnn.train()
        input_x = torch.as_tensor(np.stack(x_batch), dtype=torch.long)
        input_y = torch.as_tensor(np.argmax(np.stack(y_batch), axis=1))
        optimizer.zero_grad()
        scores = cnn(input_x)
        loss = F.cross_entropy(scores, input_y)
        loss.backward()
        optimizer.step()
        accuracy = (scores.argmax(1) == input_y).float().mean().item()
        if step % 10 == 0:
            print("step {}, loss {:g}, acc {:g}".format(step, loss.item(), accuracy))

    def evaluate(x_eval, y_eval, step, name):
        # Predictions batch by batch, as in eval.py
        cnn.eval()
        batches = batch_iter(list(x_eval), FLAGS.batch_size, 1)
        all_predictions = []
        with torch.no_grad():
            for x_eval_batch in batches:
                batch_predictions = cnn(torch.as_tensor(np.stack(x_eval_batch), dtype=torch.long)).argmax(1)
                all_predictions = np.concatenate([all_predictions, batch_predictions.numpy()])
        correct_predictions = float(sum(all_predictions == y_eval))
        print("{}: step {}, examples {}, accuracy {:g}".format(name, step, len(y_eval), correct_predictions / float(len(y_eval))))

    # Generate batches
    batches = batch_iter(list(zip(x_train, y_train)), FLAGS.batch_size, FLAGS.num_epochs)
    # Training loop. For each batch...
    current_step = 0
    for batch in batches:
        x_batch, y_batch = zip(*batch)
        current_step += 1
        train_step(x_batch, y_batch, current_step)
        if current_step % FLAGS.evaluate_every == 0:
            print("\nEvaluation:")
            evaluate(x_dev, np.argmax(y_dev, axis=1), current_step, "dev")
    evaluate(x_test, y_test, current_step, "test")


if __name__ == "__main__":
    main()
