"""Sentiment analysis with an LSTM over review tokens (binary: positive / negative).
Reviews are tokenised, numericalised and batched sequence-first like a torchtext
BucketIterator; synthetic reviews stand in for the IMDb data."""
import random
import time
import torch
import torch.nn as nn
import torch.optim as optim

SEED = 1234
random.seed(SEED)
torch.manual_seed(SEED)

VOCAB_SIZE = 500
MAX_LEN = 30
BATCH_SIZE = 64
PAD_IDX = 0
POS_WORDS = list(range(10, 40))
NEG_WORDS = list(range(40, 70))


def make_reviews(n):
    data = []
    for _ in range(n):
        label = random.randint(0, 1)
        length = random.randint(12, MAX_LEN)
        tokens = [random.randint(70, VOCAB_SIZE - 1) for _ in range(length)]
        cue = POS_WORDS if label == 1 else NEG_WORDS
        for _ in range(3):
            tokens[random.randrange(length)] = random.choice(cue)
        data.append((tokens, float(label)))
    return data


class Batch:
    def __init__(self, examples):
        max_len = max(len(t) for t, _ in examples)
        text = torch.full((max_len, len(examples)), PAD_IDX, dtype=torch.long)
        for j, (tokens, _) in enumerate(examples):
            text[:len(tokens), j] = torch.tensor(tokens)
        self.text = text
        self.label = torch.tensor([l for _, l in examples])


def iterator(data, batch_size, shuffle):
    order = list(range(len(data)))
    if shuffle:
        random.shuffle(order)
    for i in range(0, len(order), batch_size):
        yield Batch([data[k] for k in order[i:i + batch_size]])


train_data = make_reviews(1600)
valid_data = make_reviews(449)
print(f'Number of training examples: {len(train_data)}')
print(f'Number of validation examples: {len(valid_data)}')


class RNN(nn.Module):
    def __init__(self, input_dim, embedding_dim, hidden_dim, output_dim):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, embedding_dim, padding_idx=PAD_IDX)
        self.rnn = nn.LSTM(embedding_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, output_dim)

    def forward(self, text):
        # text = [sent len, batch size]
        embedded = self.embedding(text)
        # embedded = [sent len, batch size, emb dim]
        output, (hidden, cell) = self.rnn(embedded)
        # hidden = [1, batch size, hid dim]
        return self.fc(hidden.squeeze())


model = RNN(VOCAB_SIZE, 64, 128, 1)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.BCEWithLogitsLoss()


def binary_accuracy(preds, y):
    rounded_preds = torch.round(torch.sigmoid(preds))
    correct = (rounded_preds == y).float()
    return correct.sum() / len(correct)


def train(model, iterator, optimizer, criterion):
    epoch_loss, epoch_acc, n = 0, 0, 0
    model.train()
    for batch in iterator:
        optimizer.zero_grad()
        predictions = model(batch.text).squeeze(1)
        loss = criterion(predictions, batch.label)
        acc = binary_accuracy(predictions, batch.label)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        epoch_acc += acc.item()
        n += 1
        if n % 10 == 0:
            print(f'  batch {n:3d} | loss {loss.item():.3f} | acc {acc.item()*100:.1f}%')
    return epoch_loss / n, epoch_acc / n


def evaluate(model, iterator, criterion):
    epoch_loss, epoch_acc, n = 0, 0, 0
    model.eval()
    with torch.no_grad():
        for batch in iterator:
            predictions = model(batch.text).squeeze(1)
            loss = criterion(predictions, batch.label)
            acc = binary_accuracy(predictions, batch.label)
            epoch_loss += loss.item()
            epoch_acc += acc.item()
            n += 1
    return epoch_loss / n, epoch_acc / n


N_EPOCHS = 5
best_valid_loss = float('inf')
for epoch in range(N_EPOCHS):
    start_time = time.time()
    train_loss, train_acc = train(model, iterator(train_data, BATCH_SIZE, True), optimizer, criterion)
    valid_loss, valid_acc = evaluate(model, iterator(valid_data, BATCH_SIZE, False), criterion)
    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
    secs = time.time() - start_time
    print(f'Epoch: {epoch+1:02} | Epoch Time: {secs:.1f}s')
    print(f'\tTrain Loss: {train_loss:.3f} | Train Acc: {train_acc*100:.2f}%')
    print(f'\t Val. Loss: {valid_loss:.3f} |  Val. Acc: {valid_acc*100:.2f}%')
