"""Classifying names with a character-level RNN (hand-written RNN cell, LogSoftmax + NLLLoss,
one name per step, manual SGD update), on synthetic 'languages' built from syllable inventories."""
import math
import random
import string
import time

import torch
import torch.nn as nn

torch.manual_seed(0)
random.seed(0)

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)

syllables = {
    "Italian": ["ri", "ni", "lo", "tti", "cci", "bel", "ro", "ssi", "ga", "no"],
    "Japanese": ["ka", "to", "shi", "ya", "mo", "ki", "na", "ta", "su", "hi"],
    "Russian": ["ov", "sky", "ko", "vich", "nov", "ev", "kin", "ba", "zh", "in"],
    "Scottish": ["mac", "don", "ald", "gor", "cam", "bell", "ross", "kin", "mur", "ay"],
    "Greek": ["pou", "los", "pa", "dop", "ou", "kas", "ni", "is", "the", "dis"],
}
all_categories = list(syllables)
n_categories = len(all_categories)


def make_name(lang):
    k = random.randint(2, 3)
    return "".join(random.choice(syllables[lang]) for _ in range(k)).capitalize()


category_lines = {lang: [make_name(lang) for _ in range(200)] for lang in all_categories}


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


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomChoice(l):
    return l[random.randint(0, len(l) - 1)]


def randomTrainingExample():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    line_tensor = lineToTensor(line)
    return category, line, category_tensor, line_tensor


criterion = nn.NLLLoss()
learning_rate = 0.005


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss.item()


def evaluate(line_tensor):
    hidden = rnn.initHidden()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    return output


def accuracy(n=200):
    correct = 0
    with torch.no_grad():
        for _ in range(n):
            category, line, category_tensor, line_tensor = randomTrainingExample()
            guess, _ = categoryFromOutput(evaluate(line_tensor))
            correct += guess == category
    return correct / n


n_iters = 1500
print_every = 300
current_loss = 0
start = time.time()

print(f"accuracy before training: {accuracy():.3f}")
for iter in range(1, n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss
    if iter % print_every == 0:
        guess, guess_i = categoryFromOutput(output)
        correct = '✓' if guess == category else '✗ (%s)' % category
        print('%d %d%% (%.1fs) avg loss %.4f  %s / %s %s  acc %.3f' % (
            iter, iter / n_iters * 100, time.time() - start, current_loss / print_every,
            line, guess, correct, accuracy()))
        current_loss = 0
