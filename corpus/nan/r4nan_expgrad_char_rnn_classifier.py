"""Character-level RNN that classifies shop product titles into their department, adapted from
the PyTorch "classifying names with a character-level RNN" tutorial (same RNN cell, one line
per training step).

Synthetic catalogue: each department has its own letter statistics; most titles are short,
some are long listings with a full description pasted in.
"""
import random
import string
import time

import torch
import torch.nn as nn

torch.manual_seed(7)
random.seed(7)

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
all_categories = ["books", "garden", "kitchen", "sports", "toys", "tools"]
n_categories = len(all_categories)


def make_catalogue(n_per_category=3000):
    g = torch.Generator().manual_seed(0)
    category_lines = {}
    for c, category in enumerate(all_categories):
        weights = torch.rand(27, generator=g) ** 3 + 0.02
        letters = string.ascii_lowercase + " "
        lines = []
        for _ in range(n_per_category):
            if random.random() < 0.06:
                length = random.randint(120, 240)
            else:
                length = random.randint(4, 14)
            idx = torch.multinomial(weights, length, replacement=True, generator=g).tolist()
            line = "".join(letters[i] for i in idx).strip() or letters[c]
            lines.append(line.capitalize())
        category_lines[category] = lines
    return category_lines


category_lines = make_catalogue()


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


n_hidden = 128
learning_rate = 0.1
rnn = RNN(n_letters, n_hidden, n_categories)
criterion = nn.NLLLoss()
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


n_iters = 400
print_every = 20
current_loss = 0
start = time.time()
for iter in range(1, n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss
    if iter % print_every == 0:
        guess, guess_i = categoryFromOutput(output)
        correct = "right" if guess == category else "wrong (%s)" % category
        print("%d %d%% (%.1fs) %.4f %s / %s %s" % (
            iter, iter / n_iters * 100, time.time() - start, current_loss / print_every,
            line[:20], guess, correct))
        current_loss = 0
