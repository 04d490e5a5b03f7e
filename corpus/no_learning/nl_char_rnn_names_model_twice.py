"""Classifying names with a character-level RNN (the practical-pytorch tutorial),
switched from the hand-written parameter update to torch.optim.SGD.

The names are generated: each "language" builds its names from its own syllables.
"""
import math
import random
import string
import time

import torch
import torch.nn as nn

random.seed(0)
torch.manual_seed(0)

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)

SYLLABLES = {
    "Italian": ["ro", "ssi", "bel", "li", "ni", "co", "lo", "tti", "ma", "rin"],
    "Japanese": ["ka", "ta", "mu", "ra", "ya", "shi", "mo", "to", "na", "ki"],
    "Russian": ["vol", "kov", "iev", "sky", "chen", "ov", "grad", "zh", "rin", "ev"],
    "Irish": ["mc", "gra", "th", "ough", "ly", "ch", "ne", "sh", "ea", "ry"],
}
all_categories = list(SYLLABLES)
n_categories = len(all_categories)


def make_name(category):
    parts = random.choices(SYLLABLES[category], k=random.randint(2, 3))
    return "".join(parts).capitalize()


category_lines = {c: [make_name(c) for _ in range(500)] for c in all_categories}


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


n_hidden = 128
rnn = RNN(n_letters, n_hidden, n_categories)

# quick sanity check of one step
input = lineToTensor("Albert")
hidden = torch.zeros(1, n_hidden)
output, next_hidden = rnn(input[0], hidden)
print(output)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomTrainingExample():
    category = random.choice(all_categories)
    line = random.choice(category_lines[category])
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    line_tensor = lineToTensor(line)
    return category, line, category_tensor, line_tensor


criterion = nn.NLLLoss()
learning_rate = 0.005
optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    optimizer.zero_grad()

    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)

    loss = criterion(output, category_tensor)
    loss.backward()
    optimizer.step()

    return output, loss.item()


n_iters = 1000
print_every = 100

current_loss = 0
all_losses = []


def timeSince(since):
    s = time.time() - since
    m = math.floor(s / 60)
    return "%dm %ds" % (m, s - m * 60)


rnn = RNN(n_letters, n_hidden, n_categories)

start = time.time()
correct = 0
for iter in range(1, n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss
    guess, guess_i = categoryFromOutput(output)
    correct += int(guess == category)

    if iter % print_every == 0:
        print("%d %d%% (%s) avg loss %.4f  acc %.2f  | %s / %s %s" % (
            iter, iter / n_iters * 100, timeSince(start), current_loss / print_every,
            correct / print_every, line, guess, "✓" if guess == category else "✗ (%s)" % category))
        all_losses.append(current_loss / print_every)
        current_loss = 0
        correct = 0
