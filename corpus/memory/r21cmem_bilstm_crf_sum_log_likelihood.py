"""BiLSTM-CRF named-entity tagger (after the PyTorch "Advanced: Making Dynamic Decisions and the
Bi-LSTM CRF" tutorial), batched.

Emission scores come from a bidirectional LSTM over word embeddings; a CRF layer with learned
transition scores gives the sentence-level negative log-likelihood through the forward
algorithm and decodes with Viterbi. Sentences are synthetic: entity spans (PER, LOC, ORG)
drawn from per-type word lists, embedded in filler words, BIO-tagged.
"""
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

START_TAG = "<START>"
STOP_TAG = "<STOP>"
tag_to_ix = {"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3, "I-LOC": 4, "B-ORG": 5, "I-ORG": 6,
             START_TAG: 7, STOP_TAG: 8}
VOCAB_SIZE = 2000
SEQ_LEN = 60
EMBEDDING_DIM = 64
HIDDEN_DIM = 256
BATCH_SIZE = 32
EPOCHS = 2


def make_corpus(n, seed):
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(400, VOCAB_SIZE, (n, SEQ_LEN), generator=g)
    tags = torch.zeros(n, SEQ_LEN, dtype=torch.long)
    for i in range(n):
        pos = 0
        while True:
            pos += int(torch.randint(2, 10, (1,), generator=g))
            span = int(torch.randint(1, 4, (1,), generator=g))
            if pos + span >= SEQ_LEN:
                break
            etype = int(torch.randint(3, (1,), generator=g))
            words[i, pos:pos + span] = 1 + etype * 130 + torch.randint(130, (span,), generator=g)
            tags[i, pos] = 1 + 2 * etype
            tags[i, pos + 1:pos + span] = 2 + 2 * etype
            pos += span
    return words, tags


class NERDataset(Dataset):
    def __init__(self, n, seed):
        self.words, self.tags = make_corpus(n, seed)

    def __len__(self):
        return len(self.words)

    def __getitem__(self, i):
        return self.words[i], self.tags[i]


def log_sum_exp(vec, dim):
    max_score = vec.max(dim, keepdim=True)[0]
    return (max_score + torch.log(torch.exp(vec - max_score).sum(dim, keepdim=True))).squeeze(dim)


class BiLSTM_CRF(nn.Module):
    def __init__(self, vocab_size, tag_to_ix, embedding_dim, hidden_dim):
        super().__init__()
        self.tag_to_ix = tag_to_ix
        self.tagset_size = len(tag_to_ix)
        self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True, batch_first=True)
        self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
        self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
        self.transitions.data[tag_to_ix[START_TAG], :] = -10000
        self.transitions.data[:, tag_to_ix[STOP_TAG]] = -10000

    def _get_lstm_features(self, sentence):
        embeds = self.word_embeds(sentence)
        lstm_out, _ = self.lstm(embeds)
        return self.hidden2tag(lstm_out)

    def _forward_alg(self, feats):
        batch = feats.size(0)
        forward_var = torch.full((batch, self.tagset_size), -10000.0)
        forward_var[:, self.tag_to_ix[START_TAG]] = 0.0
        for t in range(feats.size(1)):
            next_tag_var = forward_var.unsqueeze(1) + self.transitions.unsqueeze(0) + feats[:, t].unsqueeze(2)
            forward_var = log_sum_exp(next_tag_var, 2)
        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        return log_sum_exp(terminal_var, 1)

    def _score_sentence(self, feats, tags):
        batch = feats.size(0)
        start = torch.full((batch, 1), self.tag_to_ix[START_TAG], dtype=torch.long)
        tags = torch.cat([start, tags], dim=1)
        emit = feats.gather(2, tags[:, 1:].unsqueeze(2)).squeeze(2).sum(1)
        trans = self.transitions[tags[:, 1:], tags[:, :-1]].sum(1)
        stop = self.transitions[self.tag_to_ix[STOP_TAG], tags[:, -1]]
        return emit + trans + stop

    def neg_log_likelihood(self, sentence, tags):
        feats = self._get_lstm_features(sentence)
        forward_score = self._forward_alg(feats)
        gold_score = self._score_sentence(feats, tags)
        return (forward_score - gold_score).mean()

    def _viterbi_decode(self, feats):
        batch = feats.size(0)
        forward_var = torch.full((batch, self.tagset_size), -10000.0)
        forward_var[:, self.tag_to_ix[START_TAG]] = 0.0
        backpointers = []
        for t in range(feats.size(1)):
            next_tag_var = forward_var.unsqueeze(1) + self.transitions.unsqueeze(0)
            best_prev = next_tag_var.argmax(2)
            forward_var = next_tag_var.gather(2, best_prev.unsqueeze(2)).squeeze(2) + feats[:, t]
            backpointers.append(best_prev)
        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        best_tag = terminal_var.argmax(1)
        path = [best_tag]
        for bptrs in reversed(backpointers[1:]):
            best_tag = bptrs.gather(1, best_tag.unsqueeze(1)).squeeze(1)
            path.append(best_tag)
        path.reverse()
        return torch.stack(path, 1)

    def forward(self, sentence):
        return self._viterbi_decode(self._get_lstm_features(sentence))


train_loader = DataLoader(NERDataset(2400, seed=1), batch_size=BATCH_SIZE, shuffle=True)
dev_set = NERDataset(256, seed=2)

model = BiLSTM_CRF(VOCAB_SIZE, tag_to_ix, EMBEDDING_DIM, HIDDEN_DIM)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-4)

t0 = time.time()
for epoch in range(EPOCHS):
    sum_log_likelihood = 0
    for step, (sentence_in, targets) in enumerate(train_loader, 1):
        model.zero_grad()
        neg_log_likelihood = model.neg_log_likelihood(sentence_in, targets)
        neg_log_likelihood.backward()
        optimizer.step()
        sum_log_likelihood += neg_log_likelihood
        if step % 20 == 0:
            print("epoch {} step {:3d}  avg NLL {:.3f}  ({:.1f}s)".format(
                epoch + 1, step, sum_log_likelihood.item() / step, time.time() - t0))
    with torch.no_grad():
        pred = model(dev_set.words)
        ent = dev_set.tags > 0
        acc = (pred == dev_set.tags).float().mean().item()
        ent_recall = (pred[ent] == dev_set.tags[ent]).float().mean().item()
    print("epoch {} done: avg NLL {:.3f}  dev tag acc {:.3f}  entity-token recall {:.3f}".format(
        epoch + 1, sum_log_likelihood.item() / len(train_loader), acc, ent_recall))
