"""Word-level LSTM language model on a small synthetic grammar.

Trained the way pytorch/examples/word_language_model does it: the corpus is
batchified into columns, get_batch slices bptt-long chunks, the hidden state is
carried over (detached) between chunks, and the weights are updated by hand with
plain SGD at lr 20 after clipping the gradient norm to 0.25.
"""
import argparse
import math
import random
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description="LSTM language model on a toy grammar")
parser.add_argument("--emsize", type=int, default=32)
parser.add_argument("--nhid", type=int, default=64)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--lr", type=float, default=20.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--bptt", type=int, default=20)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=20)
args = parser.parse_args()

torch.manual_seed(args.seed)
random.seed(args.seed)

###############################################################################
# Synthetic corpus: sentences from a tiny grammar with number agreement
###############################################################################

SING_NOUNS = ["cat", "dog", "bird", "child", "teacher", "farmer"]
PLUR_NOUNS = ["cats", "dogs", "birds", "children", "teachers", "farmers"]
SING_VERBS = ["sees", "likes", "chases", "finds"]
PLUR_VERBS = ["see", "like", "chase", "find"]
ADJS = ["big", "small", "old", "happy", "red"]
DETS = ["the", "a", "every"]


def noun_phrase(plural):
    words = ["the" if plural else random.choice(DETS)]
    if random.random() < 0.5:
        words.append(random.choice(ADJS))
    words.append(random.choice(PLUR_NOUNS if plural else SING_NOUNS))
    return words


def sentence():
    plural = random.random() < 0.5
    words = noun_phrase(plural)
    words.append(random.choice(PLUR_VERBS if plural else SING_VERBS))
    words += noun_phrase(random.random() < 0.5)
    if random.random() < 0.3:
        words += ["and", "then", "sleeps" if not plural else "sleep"]
    words.append("<eos>")
    return words


class Corpus:
    def __init__(self, n_train, n_valid):
        self.word2idx = {}
        self.idx2word = []
        self.train = self.tokenize([sentence() for _ in range(n_train)])
        self.valid = self.tokenize([sentence() for _ in range(n_valid)])

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def tokenize(self, sentences):
        ids = [self.add_word(w) for s in sentences for w in s]
        return torch.tensor(ids, dtype=torch.long)


corpus = Corpus(n_train=2400, n_valid=300)
ntokens = len(corpus.idx2word)


def batchify(data, bsz):
    # Trim off whatever does not divide cleanly and lay the stream out in bsz columns.
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, 10)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


###############################################################################
# Model
###############################################################################

class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid
        self.nlayers = nlayers
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return decoded, hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Cut the history so backprop stops at the chunk boundary."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


model = RNNModel(ntokens, args.emsize, args.nhid, args.nlayers, args.dropout)
criterion = nn.CrossEntropyLoss()


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(10)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(epoch, lr):
    model.train()
    total_loss = 0.0
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
                  "loss {:5.2f} | ppl {:8.2f}".format(
                      epoch, batch, len(train_data) // args.bptt, lr,
                      elapsed * 1000 / args.log_interval, cur_loss, math.exp(cur_loss)))
            total_loss = 0.0
            start_time = time.time()


def main():
    print(f"vocab {ntokens} words, {corpus.train.numel()} training tokens")
    lr = args.lr
    best_val_loss = None
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(epoch, lr)
        val_loss = evaluate(val_data)
        print("-" * 89)
        print("| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}".format(
            epoch, time.time() - epoch_start_time, val_loss, math.exp(val_loss)))
        print("-" * 89)
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen on the validation set.
            lr /= 4.0


if __name__ == "__main__":
    main()
