"""DSTC7 track 1 (NOESIS) baseline: a dual encoder that picks the next utterance of a
technical-support dialogue among 100 candidate responses.

Context and responses are encoded by two GRU encoders; the score of a candidate is
c^T M r (bilinear), and the model is trained with CrossEntropyLoss over the 100 candidates
(target = index of the true response).  The dialogues are a synthetic stand-in for the
Ubuntu / Advising data: each dialogue is about one topic, its true response reuses that
topic's vocabulary, and the 99 distractors are responses of other dialogues."""
import logging
import random

import numpy as np
import torch
from torch import nn, optim
from torch.nn import CrossEntropyLoss

logging.basicConfig(format='%(message)s', level=logging.INFO)
random.seed(7)
np.random.seed(7)
torch.manual_seed(7)

VOCAB = 120
N_TOPICS = 12
TOPIC_WORDS = 6
CTX_LEN = 12
RESP_LEN = 8
NUM_CANDIDATES = 100


class Dataset(object):
    def __init__(self, n_dialogues, seed):
        rng = np.random.RandomState(seed)
        common = np.arange(N_TOPICS * TOPIC_WORDS + 1, VOCAB)
        self.contexts, self.responses = [], []
        for _ in range(n_dialogues):
            t = rng.randint(N_TOPICS)
            words = np.arange(t * TOPIC_WORDS + 1, (t + 1) * TOPIC_WORDS + 1)
            ctx = np.where(rng.rand(CTX_LEN) < 0.7, rng.choice(words, CTX_LEN), rng.choice(common, CTX_LEN))
            resp = np.where(rng.rand(RESP_LEN) < 0.75, rng.choice(words, RESP_LEN), rng.choice(common, RESP_LEN))
            self.contexts.append(ctx)
            self.responses.append(resp)
        self.contexts = np.array(self.contexts)
        self.responses = np.array(self.responses)
        self.rng = rng
        # fixed candidate sets: the true response at a random position among 99 distractors
        n = len(self.contexts)
        self.candidates = np.zeros((n, NUM_CANDIDATES), dtype=np.int64)
        self.targets = np.zeros(n, dtype=np.int64)
        for i in range(n):
            others = rng.choice(np.delete(np.arange(n), i), NUM_CANDIDATES - 1, replace=False)
            pos = rng.randint(NUM_CANDIDATES)
            self.candidates[i] = np.insert(others, pos, i)
            self.targets[i] = pos

    def num_batches(self, batch_size):
        return len(self.contexts) // batch_size

    def make_batches(self, batch_size):
        order = self.rng.permutation(len(self.contexts))
        for b in range(self.num_batches(batch_size)):
            idx = order[b * batch_size:(b + 1) * batch_size]
            yield (self.contexts[idx], self.responses[self.candidates[idx]], self.targets[idx])


class Encoder(nn.Module):
    def __init__(self, vocab_size, max_len, hidden_size, input_dropout_p=0, dropout_p=0,
                 n_layers=1, bidirectional=False, rnn_cell='gru'):
        super(Encoder, self).__init__()
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.input_dropout = nn.Dropout(p=input_dropout_p)
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        cell = nn.LSTM if rnn_cell.lower() == 'lstm' else nn.GRU
        self.rnn = cell(hidden_size, hidden_size, n_layers, batch_first=True,
                        bidirectional=bidirectional, dropout=dropout_p)

    def forward(self, input_var):
        embedded = self.embedding(input_var)
        embedded = self.input_dropout(embedded)
        output, hidden = self.rnn(embedded)
        return output, hidden


class DualEncoder(nn.Module):
    def __init__(self, context, response):
        super(DualEncoder, self).__init__()
        self.context = context
        self.response = response
        c_h = context.hidden_size * (2 if context.bidirectional else 1)
        r_h = response.hidden_size * (2 if response.bidirectional else 1)
        self.M = nn.Parameter(torch.randn([c_h, r_h]))
        self.op = nn.Softmax(dim=1)

    def forward(self, context_var, responses_var):
        batch, num_resp, seq_len = responses_var.size()
        c, _ = self.context(context_var)
        r, _ = self.response(responses_var.reshape([-1, seq_len]))
        scores = torch.matmul(torch.matmul(c[:, -1, :].unsqueeze(1), self.M),
                              r.reshape([batch, num_resp, seq_len, -1])[:, :, -1, :].transpose(1, 2)).squeeze(1)
        output = self.op(scores)
        return output


class Evaluator(object):
    def __init__(self, loss_func=CrossEntropyLoss(), batch_size=50):
        self.loss_func = loss_func
        self.batch_size = batch_size

    def evaluate(self, model, data):
        model.eval()
        loss, n, ranks = 0.0, 0, []
        with torch.no_grad():
            for ctx, resp, tgt in data.make_batches(self.batch_size):
                ctx, resp, tgt = torch.tensor(ctx), torch.tensor(resp), torch.tensor(tgt)
                outputs = model(ctx, resp)
                loss += self.loss_func(outputs, tgt).item() * len(tgt)
                n += len(tgt)
                rank = (outputs > outputs.gather(1, tgt[:, None])).sum(1)
                ranks.append(rank)
        ranks = torch.cat(ranks)
        recall = {k: (ranks < k).float().mean().item() for k in (1, 10, 50)}
        return loss / n, recall[1], recall


class SupervisedTrainer(object):
    def __init__(self, loss_func=CrossEntropyLoss(), batch_size=16, print_every=10):
        self.loss_func = loss_func
        self.optimizer = None
        self.print_every = print_every
        self.batch_size = batch_size
        self.evaluator = Evaluator()
        self.logger = logging.getLogger(__name__)

    def _train_batch(self, context_variable, responses_variable, target_variable, model):
        outputs = model(context_variable, responses_variable)
        loss = self.loss_func(outputs, target_variable)
        model.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def _train_epoches(self, data, model, n_epochs, dev_data=None):
        step = 0
        print_loss_total = 0.0
        for epoch in range(1, n_epochs + 1):
            model.train(True)
            epoch_loss_total, n_batches = 0.0, 0
            for batch in data.make_batches(self.batch_size):
                step += 1
                context_variables = torch.tensor(batch[0])
                responses_variables = torch.tensor(batch[1])
                target_variables = torch.tensor(batch[2])
                loss = self._train_batch(context_variables, responses_variables, target_variables, model)
                print_loss_total += loss.item()
                epoch_loss_total += loss.item()
                n_batches += 1
                if step % self.print_every == 0:
                    self.logger.info('Step %d, Train CrossEntropyLoss: %.4f' % (step, print_loss_total / self.print_every))
                    print_loss_total = 0.0
            log_msg = "Finished epoch %d: Train CrossEntropyLoss: %.4f" % (epoch, epoch_loss_total / n_batches)
            if dev_data is not None:
                dev_loss, accuracy, recall = self.evaluator.evaluate(model, dev_data)
                log_msg += ", Dev CrossEntropyLoss: %.4f, Accuracy: %.4f" % (dev_loss, accuracy)
                log_msg += ", Recall@10: %.4f, Recall@50: %.4f" % (recall[10], recall[50])
                model.train(mode=True)
            self.logger.info(log_msg)

    def train(self, model, data, num_epochs=5, dev_data=None, optimizer=None):
        if optimizer is None:
            optimizer = optim.Adam(model.parameters())
        self.optimizer = optimizer
        self._train_epoches(data, model, num_epochs, dev_data=dev_data)


if __name__ == '__main__':
    train = Dataset(1600, seed=1)
    dev = Dataset(200, seed=2)
    ctx_encoder = Encoder(VOCAB, CTX_LEN, hidden_size=32)
    resp_encoder = Encoder(VOCAB, RESP_LEN, hidden_size=32)
    model = DualEncoder(ctx_encoder, resp_encoder)

    trainer = SupervisedTrainer(batch_size=16)
    dev_loss, acc, recall = trainer.evaluator.evaluate(model, dev)
    logging.info("Before training: Dev CrossEntropyLoss: %.4f, Accuracy: %.4f, Recall@10: %.4f, Recall@50: %.4f"
                 % (dev_loss, acc, recall[10], recall[50]))
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    trainer.train(model, train, num_epochs=2, dev_data=dev, optimizer=optimizer)
