"""deepjazz-style jazz solo generation, PyTorch port.

The solo is parsed into an abstract grammar (one token per note: type,duration[,<interval>]
with C = chord tone, S = scale tone, A = approach tone, X = other, R = rest). A two-layer
LSTM learns to predict the next grammar token from the previous 20; after every epoch one
measure is generated with temperature ("diversity") sampling to hear how training goes.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

max_len = 20
N_epochs = 20
diversity = 0.5
max_tries = 1000

# ---------------------------------------------------------------- corpus (abstract grammars)
LICKS = [
    "C,0.250 S,0.250,<m2,P-4> A,0.250,<d1,M-2> C,0.250,<P1,m3> S,0.500,<M2,P5> R,0.250 C,0.250,<m-3,P1>",
    "C,0.500 X,0.250,<A1,M3> S,0.250,<m2,P4> S,0.250,<M2,m6> A,0.250,<d2,M2> C,0.500,<P1,m3>",
    "C,0.250 C,0.250,<M3,P5> S,0.250,<m-2,M3> S,0.250,<M-2,P4> A,0.125,<d-1,M2> C,0.375,<P-4,m-3> R,0.500",
    "S,0.750 A,0.250,<m2,M2> C,0.250,<M2,P4> X,0.250,<A-4,P1> C,0.500,<M3,P5>",
    "C,0.125 S,0.125,<M2,P4> S,0.125,<m2,M6> C,0.125,<M2,P5> C,0.500,<m-3,P1> R,0.250 S,0.250,<P4,m7>",
    "C,1.000 S,0.250,<M-2,m3> A,0.250,<d1,P4> C,0.500,<P5,M6>",
    "X,0.250 C,0.250,<m3,P5> S,0.250,<M2,M6> S,0.250,<m2,m7> C,0.500,<M-6,P1> A,0.250,<d-2,M-2> R,0.250",
    "C,0.375 S,0.125,<m2,P4> C,0.250,<M2,P5> A,0.250,<A1,M6> S,0.500,<m-2,P4> C,0.500,<M-3,m3>",
]


def parse_solo(n_measures, rng):
    """A long solo built from the player's licks (the abstract grammar of each measure)."""
    abstract_grammars = [LICKS[rng.randint(len(LICKS))] for _ in range(n_measures)]
    corpus = [tok for g in abstract_grammars for tok in g.split(' ')]
    return corpus, abstract_grammars


corpus, abstract_grammars = parse_solo(260, np.random.RandomState(1))
values = sorted(set(corpus))
val_indices = dict((v, i) for i, v in enumerate(values))
indices_val = dict((i, v) for i, v in enumerate(values))
N_values = len(values)
print('corpus length:', len(corpus), 'total # of values:', N_values)


# ---------------------------------------------------------------- model
class JazzLSTM(nn.Module):
    def __init__(self, n_values, hidden=128):
        super().__init__()
        self.lstm1 = nn.LSTM(n_values, hidden, batch_first=True)
        self.drop1 = nn.Dropout(0.2)
        self.lstm2 = nn.LSTM(hidden, hidden, batch_first=True)
        self.drop2 = nn.Dropout(0.2)
        self.dense = nn.Linear(hidden, n_values)

    def forward(self, x):
        h, _ = self.lstm1(x)
        h = self.drop1(h)
        h, _ = self.lstm2(h)
        h = self.drop2(h[:, -1])
        return self.dense(h)

    def predict(self, x):
        self.eval()
        with torch.no_grad():
            probs = torch.softmax(self(torch.from_numpy(x).float()), dim=-1)
        self.train()
        return probs.numpy()


def build_dataset(corpus, val_indices, max_len, step=3):
    sentences, next_values = [], []
    for i in range(0, len(corpus) - max_len, step):
        sentences.append(corpus[i: i + max_len])
        next_values.append(corpus[i + max_len])
    X = np.zeros((len(sentences), max_len, N_values), dtype=np.float32)
    y = np.zeros(len(sentences), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        for t, val in enumerate(sentence):
            X[i, t, val_indices[val]] = 1
        y[i] = val_indices[next_values[i]]
    return torch.from_numpy(X), torch.from_numpy(y)


# ---------------------------------------------------------------- generation
def __sample(a, temperature=1.0):
    a = np.log(a) / temperature
    a = np.exp(a) / np.sum(np.exp(a))
    return np.argmax(np.random.multinomial(1, a, 1))


def __predict(model, x, indices_val, diversity):
    preds = model.predict(x)[0]
    next_index = __sample(preds, diversity)
    next_val = indices_val[next_index]
    return next_val


def __generate_grammar(model, corpus, abstract_grammars, values, val_indices, indices_val, max_len, max_tries, diversity):
    curr_grammar = ''
    start_index = np.random.randint(0, len(corpus) - max_len)
    sentence = corpus[start_index: start_index + max_len]  # seed
    running_length = 0.0
    while running_length <= 4.1:
        x = np.zeros((1, max_len, len(values)))
        for t, val in enumerate(sentence):
            x[0, t, val_indices[val]] = 1.

        next_val = __predict(model, x, indices_val, diversity)

        # fix first note: must not have < > and not be a rest
        if running_length < 0.00001:
            tries = 0
            while next_val.split(',')[0] == 'R' or len(next_val.split(',')) != 2:
                if tries >= max_tries:
                    rand = np.random.randint(0, len(abstract_grammars))
                    next_val = abstract_grammars[rand].split(' ')[0]
                else:
                    next_val = __predict(model, x, indices_val, diversity)
                tries += 1

        sentence = sentence[1:]
        sentence.append(next_val)
        if running_length > 0.00001:
            curr_grammar += ' '
        curr_grammar += next_val
        running_length += float(next_val.split(',')[1])
    return curr_grammar


# ---------------------------------------------------------------- training
X, y = build_dataset(corpus, val_indices, max_len)
model = JazzLSTM(N_values)
optimizer = torch.optim.RMSprop(model.parameters(), lr=0.003, alpha=0.9, eps=1e-7)
criterion = nn.CrossEntropyLoss()
batch_size = 64
print('sentences:', len(X), 'batches per epoch:', (len(X) + batch_size - 1) // batch_size)

step = 0
for epoch in range(1, N_epochs + 1):
    perm = torch.randperm(len(X))
    total, correct, seen = 0.0, 0, 0
    for i in range(0, len(X), batch_size):
        idx = perm[i:i + batch_size]
        logits = model(X[idx])
        loss = criterion(logits, y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        total += loss.item() * len(idx)
        correct += (logits.argmax(1) == y[idx]).sum().item()
        seen += len(idx)
    print('Epoch %d/%d - step %d - loss: %.4f - acc: %.3f' % (epoch, N_epochs, step, total / seen, correct / seen))
    measure = __generate_grammar(model, corpus, abstract_grammars, values, val_indices, indices_val,
                                 max_len, max_tries, diversity)
    print('    generated measure:', measure)
