"""Generic-answer classifier (GAC) for a campus chatbot.

A question is hashed word by word into a fixed vocabulary, embedded, read by
an LSTM and classified into one of the generic answer templates. The question
set is generated here from a few phrasings per answer class instead of being
read from gac_data.csv.
"""
num_of_gas = 8
max_question_length = 12
top_words = 2000
filt = '.?"\\/!,<>@#$%^&*_-+=|}{][:;~`'
embedding_vector_length = 32
percent_test = 0.1
batch_size = 64
nb_epoch = 6

import math
import random
from zlib import adler32

import torch
import torch.nn as nn

random.seed(0)
torch.manual_seed(0)

TOPICS = [
    ["phone", "number", "call", "extension"],
    ["email", "address", "contact", "mail"],
    ["office", "room", "building", "located"],
    ["hours", "open", "schedule", "available"],
    ["teach", "course", "class", "lecture"],
    ["research", "lab", "projects", "publications"],
    ["advisor", "students", "supervise", "phd"],
    ["department", "college", "school", "faculty"],
]
PEOPLE = ["professor smith", "dr jones", "the dean", "dr patel", "professor lee", "dr garcia", "the chair", "dr kim"]
FILLER = ["what", "is", "the", "of", "where", "can", "i", "find", "does", "do", "you", "know", "please", "tell", "me", "about"]


def make_question(ga):
    words = random.sample(FILLER, 4) + random.sample(TOPICS[ga], 2) + random.choice(PEOPLE).split()
    random.shuffle(words)
    return " ".join(words) + "?"


def my_hash(item):
    to_hash = item.replace("'", " ")
    for c in filt:
        to_hash = to_hash.replace(c, "")
    final = []
    for word in to_hash.lower().split(" "):
        final.append(adler32(word.encode()) % (top_words - 1) + 1)
    return final


def pad_sequences(seqs, maxlen):
    out = torch.zeros(len(seqs), maxlen, dtype=torch.long)
    for i, s in enumerate(seqs):
        s = s[-maxlen:]
        out[i, maxlen - len(s):] = torch.tensor(s)
    return out


class GAC(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(top_words, embedding_vector_length, padding_idx=0)
        self.lstm = nn.LSTM(embedding_vector_length, 50, batch_first=True)
        self.dense = nn.Linear(50, num_of_gas)

    def forward(self, x):
        out, (h, c) = self.lstm(self.embedding(x))
        return self.dense(h[-1])


x = []
y = []
for ga in range(num_of_gas):
    for record in range(225):
        x.append(my_hash(make_question(ga)))
        y.append(ga)

random.shuffle(x)

x = pad_sequences(x, maxlen=max_question_length)
y = torch.tensor(y)

split_point = math.floor(len(x) * percent_test)
x_test = x[:split_point]
x_train = x[split_point:]
y_test = y[:split_point]
y_train = y[split_point:]

model = GAC()
print(model)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(nb_epoch):
    model.train()
    perm = torch.randperm(len(x_train))
    running_loss, correct = 0.0, 0
    for i in range(0, len(x_train), batch_size):
        idx = perm[i:i + batch_size]
        xb, yb = x_train[idx], y_train[idx]
        optimizer.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        optimizer.step()
        running_loss += loss.item() * len(idx)
        correct += (out.argmax(1) == yb).sum().item()
    model.eval()
    with torch.no_grad():
        val_out = model(x_test)
        val_loss = criterion(val_out, y_test).item()
        val_acc = (val_out.argmax(1) == y_test).float().mean().item()
    print("Epoch %d/%d - loss: %.4f - acc: %.4f - val_loss: %.4f - val_acc: %.4f" % (
        epoch + 1, nb_epoch, running_loss / len(x_train), correct / len(x_train), val_loss, val_acc))

print("Accuracy: %.2f%%" % (val_acc * 100))
