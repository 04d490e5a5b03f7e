"""BiLSTM sentence classifier with explicit initial states h0/c0.

Toy sentiment task: each sentence is a sequence of token ids; a few "positive" and
"negative" words decide the label, the rest is filler vocabulary.
"""
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Config:
    vocab_size = 200
    embed_dim = 32
    hidden_size = 48
    num_layers = 2
    drop_out = 0.1
    num_classes = 2
    batch_size = 16
    seq_len = 12
    lr = 2e-3
    epochs = 3


config = Config()
torch.manual_seed(0)
random.seed(0)

POS = list(range(10, 20))
NEG = list(range(20, 30))


def make_sentences(n):
    xs, ys = [], []
    for _ in range(n):
        label = random.randint(0, 1)
        words = [random.randint(30, config.vocab_size - 1) for _ in range(config.seq_len)]
        for pos in random.sample(range(config.seq_len), 3):
            words[pos] = random.choice(POS if label == 1 else NEG)
        xs.append(words)
        ys.append(label)
    return torch.tensor(xs), torch.tensor(ys)


class BiLSTMClassifier(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.input_size = config.embed_dim
        self.hidden_size = config.hidden_size
        self.num_layers = config.num_layers
        self.embedding = nn.Embedding(config.vocab_size, config.embed_dim)
        self.bilstm = nn.LSTM(
            input_size=self.input_size,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            bidirectional=True,
            bias=True,
            dropout=config.drop_out,
        )
        self.fc = nn.Linear(2 * self.hidden_size, config.num_classes)

    def forward(self, tokens):
        input = self.embedding(tokens)
        batch = tokens.size(0)
        h0 = torch.zeros(self.num_layers * 2, batch, self.hidden_size)
        c0 = torch.zeros(self.num_layers * 2, batch, self.hidden_size)
        output, (hn, cn) = self.bilstm(input, (h0, c0))
        feat = torch.cat([hn[-2], hn[-1]], dim=1)
        return self.fc(feat)


x_train, y_train = make_sentences(640)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=config.batch_size, shuffle=True)

model = BiLSTMClassifier(config)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)

for epoch in range(config.epochs):
    model.train()
    total, correct, loss_sum = 0, 0, 0.0
    for step, (tokens, labels) in enumerate(train_loader):
        logits = model(tokens)
        loss = criterion(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * labels.size(0)
        correct += (logits.argmax(1) == labels).sum().item()
        total += labels.size(0)
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    print(f"epoch {epoch} loss {loss_sum / total:.4f} acc {correct / total:.3f}")
