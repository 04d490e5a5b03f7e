"""AWD-LSTM style word language model (after salesforce/awd-lstm-lm main.py) on a small synthetic
corpus: tied embedding/decoder, locked (variational) dropout, AR/TAR regularisation, variable-length
BPTT with the learning rate rescaled by seq_len / bptt, gradient clipping, SGD at lr 30 and the
NT-ASGD switch to torch.optim.ASGD; validation uses the averaged weights ('ax')."""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--emsize', type=int, default=48)
parser.add_argument('--nhid', type=int, default=96)
parser.add_argument('--lr', type=float, default=30)
parser.add_argument('--clip', type=float, default=0.25)
parser.add_argument('--epochs', type=int, default=12)
parser.add_argument('--batch_size', type=int, default=16)
parser.add_argument('--bptt', type=int, default=20)
parser.add_argument('--dropout', type=float, default=0.3)
parser.add_argument('--dropouti', type=float, default=0.2)
parser.add_argument('--alpha', type=float, default=2)
parser.add_argument('--beta', type=float, default=1)
parser.add_argument('--wdecay', type=float, default=1.2e-6)
parser.add_argument('--nonmono', type=int, default=1)
parser.add_argument('--seed', type=int, default=141)
args = parser.parse_args()

np.random.seed(args.seed)
torch.manual_seed(args.seed)


def make_corpus(n_tokens, vocab=40, seed=0):
    rng = np.random.RandomState(seed)
    trans = rng.dirichlet(np.full(vocab, 0.08), size=vocab)
    toks = [0]
    for _ in range(n_tokens - 1):
        toks.append(rng.choice(vocab, p=trans[toks[-1]]))
    return torch.tensor(toks, dtype=torch.long), vocab


data_all, ntokens = make_corpus(16000)
train_ids, val_ids = data_all[:14000], data_all[14000:]


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, seq_len):
    seq_len = min(seq_len, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


class LockedDropout(nn.Module):
    def forward(self, x, dropout=0.5):
        if not self.training or not dropout:
            return x
        m = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - dropout)
        return x * (m / (1 - dropout))


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.lockdrop = LockedDropout()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnns = nn.ModuleList([nn.LSTM(ninp, nhid), nn.LSTM(nhid, ninp)])
        self.decoder = nn.Linear(ninp, ntoken)
        self.decoder.weight = self.encoder.weight
        self.encoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.bias.data.zero_()

    def forward(self, inp, hidden, return_h=False):
        emb = self.lockdrop(self.encoder(inp), args.dropouti)
        raw_output = emb
        new_hidden, raw_outputs, outputs = [], [], []
        for l, rnn in enumerate(self.rnns):
            raw_output, new_h = rnn(raw_output, hidden[l])
            new_hidden.append(new_h)
            raw_outputs.append(raw_output)
            if l != len(self.rnns) - 1:
                raw_output = self.lockdrop(raw_output, args.dropout)
                outputs.append(raw_output)
        output = self.lockdrop(raw_output, args.dropout)
        outputs.append(output)
        decoded = self.decoder(output.view(-1, output.size(2)))
        if return_h:
            return decoded, new_hidden, raw_outputs, outputs
        return decoded, new_hidden

    def init_hidden(self, bsz):
        return [(torch.zeros(1, bsz, args.nhid), torch.zeros(1, bsz, args.nhid)),
                (torch.zeros(1, bsz, args.emsize), torch.zeros(1, bsz, args.emsize))]


train_data = batchify(train_ids, args.batch_size)
val_data = batchify(val_ids, 10)
model = RNNModel(ntokens, args.emsize, args.nhid)
criterion = nn.CrossEntropyLoss()
params = list(model.parameters())


def evaluate(data_source, batch_size=10):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i, args.bptt)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output, targets).item()
            hidden = repackage_hidden(hidden)
    return total_loss / len(data_source)


def train(epoch):
    model.train()
    hidden = model.init_hidden(args.batch_size)
    batch, i, total_loss = 0, 0, 0.0
    while i < train_data.size(0) - 1 - 1:
        bptt = args.bptt if np.random.random() < 0.95 else args.bptt / 2.
        seq_len = max(5, int(np.random.normal(bptt, 5)))
        lr2 = optimizer.param_groups[0]['lr']
        optimizer.param_groups[0]['lr'] = lr2 * seq_len / args.bptt
        data, targets = get_batch(train_data, i, seq_len)
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden, rnn_hs, dropped_rnn_hs = model(data, hidden, return_h=True)
        raw_loss = criterion(output, targets)
        loss = raw_loss
        loss = loss + sum(args.alpha * h.pow(2).mean() for h in dropped_rnn_hs[-1:])
        loss = loss + sum(args.beta * (h[1:] - h[:-1]).pow(2).mean() for h in rnn_hs[-1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        optimizer.step()
        total_loss += raw_loss.item()
        optimizer.param_groups[0]['lr'] = lr2
        batch += 1
        i += seq_len
    print('| epoch {:2d} | {:3d} batches | lr {:5.2f} | train loss {:5.3f} | ppl {:7.2f}'.format(
        epoch, batch, optimizer.param_groups[0]['lr'], total_loss / batch, math.exp(total_loss / batch)))


print('init valid ppl {:.2f}'.format(math.exp(evaluate(val_data))))
best_val_loss = []
stored_loss = 1e8
optimizer = torch.optim.SGD(params, lr=args.lr, weight_decay=args.wdecay)
for epoch in range(1, args.epochs + 1):
    train(epoch)
    if 't0' in optimizer.param_groups[0]:
        tmp = {}
        for prm in model.parameters():
            tmp[prm] = prm.data.clone()
            prm.data = optimizer.state[prm]['ax'].clone()
        val_loss2 = evaluate(val_data)
        print('| end of epoch {:2d} | valid loss (averaged) {:5.3f} | valid ppl {:7.2f}'.format(
            epoch, val_loss2, math.exp(val_loss2)))
        if val_loss2 < stored_loss:
            stored_loss = val_loss2
        for prm in model.parameters():
            prm.data = tmp[prm].clone()
    else:
        val_loss = evaluate(val_data)
        print('| end of epoch {:2d} | valid loss {:5.3f} | valid ppl {:7.2f}'.format(
            epoch, val_loss, math.exp(val_loss)))
        if val_loss < stored_loss:
            stored_loss = val_loss
        if 't0' not in optimizer.param_groups[0] and (
                len(best_val_loss) > args.nonmono and val_loss > min(best_val_loss[:-args.nonmono])):
            print('Switching to ASGD')
            optimizer = torch.optim.ASGD(model.parameters(), lr=args.lr, t0=0, lambd=0., weight_decay=args.wdecay)
        best_val_loss.append(val_loss)
print('best valid ppl {:.2f}'.format(math.exp(stored_loss)))
