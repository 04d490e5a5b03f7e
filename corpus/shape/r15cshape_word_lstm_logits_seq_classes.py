"""Word-level LSTM text generator (next-word prediction), after the "Text generation with RNNs"
chapter of a generative-AI book.

A synthetic novel is written by a small Markov chain over a made-up vocabulary, tokenized into
words, mapped to integers, cut into input/target windows shifted by one word, and used to train
an Embedding -> 2-layer LSTM -> Linear(vocab) model with CrossEntropyLoss. At the end a short
passage is sampled from the model.
"""
from collections import Counter

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

torch.manual_seed(42)
np.random.seed(42)

# ---------------------------------------------------------------- synthetic "novel"
syllables = ["an", "na", "ka", "re", "ni", "lev", "in", "ol", "bon", "sky", "da", "ria",
             "ser", "yo", "zha", "vro", "ti", "mi", "ha", "il"]
lexicon = sorted({a + b for a in syllables for b in syllables})[:300]
lexicon += [",", ".", "the", "and", "he", "she", "said", "was"]
successors = {w: np.random.choice(len(lexicon), size=4, replace=False) for w in lexicon}
words_out = [lexicon[0]]
for _ in range(40000):
    nxt = successors[words_out[-1]][np.random.randint(4)]
    words_out.append(lexicon[nxt])
raw_text = " ".join(words_out)

text = raw_text.lower().split()
word_counts = Counter(text)
words = sorted(word_counts, key=word_counts.get, reverse=True)
word_to_int = {v: k for k, v in enumerate(words)}
int_to_word = {k: v for k, v in enumerate(words)}
print(f"the text contains {len(text)} words")
print(f"there are {len(words)} unique tokens")
wordidx = [word_to_int[w] for w in text]

seq_len = 30
xys = []
for n in range(0, 6000):
    x = wordidx[n:n + seq_len]
    y = wordidx[n + 1:n + seq_len + 1]
    xys.append((torch.tensor(x), torch.tensor(y)))

batch_size = 32
loader = DataLoader(xys, batch_size=batch_size, shuffle=True)
x, y = next(iter(loader))
print(x.shape, y.shape)


# ---------------------------------------------------------------- model
class WordLSTM(nn.Module):
    def __init__(self, input_size=64, n_embed=64, n_layers=2, drop_prob=0.2):
        super().__init__()
        self.input_size = input_size
        self.drop_prob = drop_prob
        self.n_layers = n_layers
        self.n_embed = n_embed
        vocab_size = len(word_to_int)
        self.embedding = nn.Embedding(vocab_size, n_embed)
        self.lstm = nn.LSTM(input_size=self.input_size, hidden_size=self.n_embed,
                            num_layers=self.n_layers, dropout=self.drop_prob, batch_first=True)
        self.fc = nn.Linear(input_size, vocab_size)

    def forward(self, x, hc):
        embed = self.embedding(x)
        x, hc = self.lstm(embed, hc)
        x = self.fc(x)
        return x, hc

    def init_hidden(self, n_seqs):
        weight = next(self.parameters()).data
        return (weight.new(self.n_layers, n_seqs, self.n_embed).zero_(),
                weight.new(self.n_layers, n_seqs, self.n_embed).zero_())


model = WordLSTM()
print(model)
lr = 0.005
optimizer = torch.optim.Adam(model.parameters(), lr=lr)
loss_func = nn.CrossEntropyLoss()

# ---------------------------------------------------------------- training
model.train()
for epoch in range(1):
    tloss = 0
    sh, sc = model.init_hidden(batch_size)
    for i, (x, y) in enumerate(loader):
        if x.shape[0] == batch_size:
            inputs, targets = x, y
            optimizer.zero_grad()
            output, (sh, sc) = model(inputs, (sh, sc))
            loss = loss_func(output, targets)
            sh, sc = sh.detach(), sc.detach()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5)
            optimizer.step()
            tloss += loss.item()
        if (i + 1) % 25 == 0:
            print(f"at epoch {epoch} iteration {i + 1} average loss = {tloss / (i + 1):.4f}")


# ---------------------------------------------------------------- sampling
def sample(model, prompt, length=30):
    model.eval()
    words_gen = prompt.lower().split(" ")
    hc = model.init_hidden(1)
    for _ in range(length - len(words_gen)):
        x = torch.tensor([[word_to_int[w] for w in words_gen[-seq_len:]]])
        output, hc = model(x, hc)
        logits = output[0][-1]
        p = nn.functional.softmax(logits, dim=0).detach().numpy()
        idx = np.random.choice(len(logits), p=p)
        words_gen.append(int_to_word[idx])
    return " ".join(words_gen)


print(sample(model, prompt=text[0] + " " + text[1]))
