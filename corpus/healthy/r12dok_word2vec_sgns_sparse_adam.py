"""word2vec skip-gram with negative sampling, after Andras7/word2vec-pytorch
(word2vec/data_reader.py, model.py, trainer.py).

The text file is replaced by a synthetic corpus written in the script: 8 "topics" of 40 words
each plus 20 function words, sentences drawn from one topic with Zipf-like frequencies. The
DataReader (min_count, sub-sampling discard table, unigram^0.75 negatives table), the dataset
that yields every (centre, context, negatives) pair of a line, the SkipGramModel with sparse
u/v embeddings and SparseAdam + CosineAnnealingLR re-created every iteration follow the repo.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn import init
from torch.utils.data import DataLoader, Dataset

np.random.seed(12345)
torch.manual_seed(12345)

N_TOPICS = 8
WORDS_PER_TOPIC = 40
N_FUNCTION = 20


def make_corpus(n_lines, seed=0):
    rng = np.random.RandomState(seed)
    topic_words = [["t%d_w%d" % (t, i) for i in range(WORDS_PER_TOPIC)] for t in range(N_TOPICS)]
    function_words = ["f%d" % i for i in range(N_FUNCTION)]
    zipf = 1.0 / np.arange(1, WORDS_PER_TOPIC + 1) ** 0.8
    zipf /= zipf.sum()
    lines = []
    for _ in range(n_lines):
        t = rng.randint(N_TOPICS)
        length = rng.randint(8, 16)
        words = []
        for _ in range(length):
            if rng.rand() < 0.3:
                words.append(function_words[rng.randint(N_FUNCTION)])
            else:
                words.append(topic_words[t][rng.choice(WORDS_PER_TOPIC, p=zipf)])
        lines.append(" ".join(words))
    return lines


class DataReader:
    NEGATIVE_TABLE_SIZE = 1e6

    def __init__(self, lines, min_count):

        self.negatives = []
        self.discards = []
        self.negpos = 0

        self.word2id = dict()
        self.id2word = dict()
        self.sentences_count = 0
        self.token_count = 0
        self.word_frequency = dict()

        self.lines = lines
        self.read_words(min_count)
        self.initTableNegatives()
        self.initTableDiscards()

    def read_words(self, min_count):
        word_frequency = dict()
        for line in self.lines:
            line = line.split()
            if len(line) > 1:
                self.sentences_count += 1
                for word in line:
                    if len(word) > 0:
                        self.token_count += 1
                        word_frequency[word] = word_frequency.get(word, 0) + 1

        wid = 0
        for w, c in word_frequency.items():
            if c < min_count:
                continue
            self.word2id[w] = wid
            self.id2word[wid] = w
            self.word_frequency[wid] = c
            wid += 1
        print("Total embeddings: " + str(len(self.word2id)))

    def initTableDiscards(self):
        t = 0.001
        f = np.array(list(self.word_frequency.values())) / self.token_count
        self.discards = np.sqrt(t / f) + (t / f)

    def initTableNegatives(self):
        pow_frequency = np.array(list(self.word_frequency.values())) ** 0.5
        words_pow = sum(pow_frequency)
        ratio = pow_frequency / words_pow
        count = np.round(ratio * DataReader.NEGATIVE_TABLE_SIZE)
        for wid, c in enumerate(count):
            self.negatives += [wid] * int(c)
        self.negatives = np.array(self.negatives)
        np.random.shuffle(self.negatives)

    def getNegatives(self, target, size):  # TODO check equality with target
        response = self.negatives[self.negpos:self.negpos + size]
        self.negpos = (self.negpos + size) % len(self.negatives)
        if len(response) != size:
            return np.concatenate((response, self.negatives[0:self.negpos]))
        return response


class Word2vecDataset(Dataset):
    def __init__(self, data, window_size):
        self.data = data
        self.window_size = window_size

    def __len__(self):
        return self.data.sentences_count

    def __getitem__(self, idx):
        line = self.data.lines[idx]
        words = line.split()

        if len(words) > 1:
            word_ids = [self.data.word2id[w] for w in words if
                        w in self.data.word2id and np.random.rand() < self.data.discards[self.data.word2id[w]]]

            boundary = np.random.randint(1, self.window_size)
            return [(u, v, self.data.getNegatives(v, 5)) for i, u in enumerate(word_ids) for j, v in
                    enumerate(word_ids[max(i - boundary, 0):i + boundary]) if u != v]
        return []

    @staticmethod
    def collate(batches):
        all_u = [u for batch in batches for u, _, _ in batch if len(batch) > 0]
        all_v = [v for batch in batches for _, v, _ in batch if len(batch) > 0]
        all_neg_v = [neg_v for batch in batches for _, _, neg_v in batch if len(batch) > 0]

        return torch.LongTensor(all_u), torch.LongTensor(all_v), torch.LongTensor(np.array(all_neg_v))


class SkipGramModel(nn.Module):

    def __init__(self, emb_size, emb_dimension):
        super(SkipGramModel, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)

        initrange = 1.0 / self.emb_dimension
        init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
        init.constant_(self.v_embeddings.weight.data, 0)

    def forward(self, pos_u, pos_v, neg_v):
        emb_u = self.u_embeddings(pos_u)
        emb_v = self.v_embeddings(pos_v)
        emb_neg_v = self.v_embeddings(neg_v)

        score = torch.sum(torch.mul(emb_u, emb_v), dim=1)
        score = torch.clamp(score, max=10, min=-10)
        score = -F.logsigmoid(score)

        neg_score = torch.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
        neg_score = torch.clamp(neg_score, max=10, min=-10)
        neg_score = -torch.sum(F.logsigmoid(-neg_score), dim=1)

        return torch.mean(score + neg_score)


def topic_separation(model, data):
    """Mean cosine similarity of same-topic minus different-topic word pairs (u embeddings)."""
    emb = F.normalize(model.u_embeddings.weight.detach(), dim=1)
    topics = torch.tensor([int(data.id2word[i][1]) if data.id2word[i].startswith("t") else -1
                           for i in range(len(data.id2word))])
    keep = topics >= 0
    emb, topics = emb[keep], topics[keep]
    sim = emb @ emb.t()
    same = topics[:, None] == topics[None, :]
    eye = torch.eye(len(topics), dtype=torch.bool)
    return sim[same & ~eye].mean().item() - sim[~same].mean().item()


class Word2VecTrainer:
    def __init__(self, lines, emb_dimension=100, batch_size=32, window_size=5, iterations=3,
                 initial_lr=0.001, min_count=5):

        self.data = DataReader(lines, min_count)
        dataset = Word2vecDataset(self.data, window_size)
        self.dataloader = DataLoader(dataset, batch_size=batch_size,
                                     shuffle=False, num_workers=0, collate_fn=dataset.collate)

        self.emb_size = len(self.data.word2id)
        self.emb_dimension = emb_dimension
        self.batch_size = batch_size
        self.iterations = iterations
        self.initial_lr = initial_lr
        self.skip_gram_model = SkipGramModel(self.emb_size, self.emb_dimension)
        self.device = torch.device("cpu")

    def train(self):

        print("topic separation before training: %.4f" % topic_separation(self.skip_gram_model, self.data))
        for iteration in range(self.iterations):

            print("\n\n\nIteration: " + str(iteration + 1))
            optimizer = optim.SparseAdam(list(self.skip_gram_model.parameters()), lr=self.initial_lr)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, len(self.dataloader))

            running_loss = 0.0
            for i, sample_batched in enumerate(self.dataloader):

                if len(sample_batched[0]) > 1:
                    pos_u = sample_batched[0].to(self.device)
                    pos_v = sample_batched[1].to(self.device)
                    neg_v = sample_batched[2].to(self.device)

                    scheduler.step()
                    optimizer.zero_grad()
                    loss = self.skip_gram_model.forward(pos_u, pos_v, neg_v)
                    loss.backward()
                    optimizer.step()

                    running_loss = running_loss * 0.9 + loss.item() * 0.1
                    if i > 0 and i % 20 == 0:
                        print(" Loss: " + str(running_loss))

            print("topic separation after iteration %d: %.4f"
                  % (iteration + 1, topic_separation(self.skip_gram_model, self.data)))


if __name__ == '__main__':
    w2v = Word2VecTrainer(make_corpus(2400), emb_dimension=64, initial_lr=0.01)
    w2v.train()
