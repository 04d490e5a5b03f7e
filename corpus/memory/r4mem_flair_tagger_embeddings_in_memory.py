"""Part-of-speech tagging with stacked word + contextual string embeddings (flair-style).

Sentences are lists of Token objects; each embedding (two static word-vector tables, forward
and backward language-model states) is computed for a mini-batch of sentences and attached to
its tokens, the tagger reads the concatenated token embeddings through a BiLSTM. The corpus is
synthetic: sentences generated from a small grammar over a 3000-word vocabulary, each word
belonging to one part of speech.
"""
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)

TAGS = ['DET', 'ADJ', 'NOUN', 'VERB', 'ADV', 'ADP', 'PRON', 'CONJ', 'PUNCT']


class Token:
    def __init__(self, text, idx):
        self.text = text
        self.idx = idx
        self.tags = {}
        self._embeddings = {}

    def set_embedding(self, name, vector):
        self._embeddings[name] = vector

    def clear_embeddings(self):
        self._embeddings = {}

    def get_embedding(self):
        return torch.cat([self._embeddings[name] for name in sorted(self._embeddings)])


class Sentence:
    def __init__(self, words, tags):
        self.tokens = []
        for i, (w, t) in enumerate(zip(words, tags)):
            token = Token(w, i + 1)
            token.tags['pos'] = t
            self.tokens.append(token)

    def __len__(self):
        return len(self.tokens)

    def __iter__(self):
        return iter(self.tokens)

    def clear_embeddings(self, also_clear_word_embeddings=True):
        if also_clear_word_embeddings:
            for token in self.tokens:
                token.clear_embeddings()


def make_corpus(n_sentences, vocab_per_tag=330):
    lexicon = {t: ['%s%d' % (t.lower(), i) for i in range(vocab_per_tag)] for t in TAGS}
    patterns = [['DET', 'ADJ', 'NOUN', 'VERB', 'ADP', 'DET', 'NOUN'],
                ['PRON', 'VERB', 'ADV', 'CONJ', 'PRON', 'VERB', 'DET', 'NOUN'],
                ['DET', 'NOUN', 'ADP', 'DET', 'ADJ', 'ADJ', 'NOUN', 'VERB', 'ADV']]
    sentences = []
    for _ in range(n_sentences):
        tags = []
        while len(tags) < 18:
            tags += random.choice(patterns) + ['PUNCT']
        words = [random.choice(lexicon[t]) for t in tags]
        sentences.append(Sentence(words, tags))
    vocab = sorted({w for ws in lexicon.values() for w in ws})
    return sentences, vocab


class WordEmbeddings:
    """Static pre-trained word vectors (frozen 300-d tables standing in for GloVe / fastText)."""

    def __init__(self, vocab, name, dim=300):
        self.name = name
        self.embedding_length = dim
        # words of one part of speech share a direction, as distributional vectors tend to
        centroids = {t: np.random.randn(dim) for t in TAGS}
        vectors = [0.5 * centroids[w.rstrip('0123456789').upper()] + np.random.randn(dim) for w in vocab]
        self.vectors = torch.from_numpy(0.3 * np.stack(vectors)).float()
        self.index = {w: i for i, w in enumerate(vocab)}

    def embed(self, sentences):
        tokens = [t for s in sentences for t in s if self.name not in t._embeddings]
        if not tokens:
            return
        word_embeddings = self.vectors[torch.tensor([self.index[t.text] for t in tokens])]
        for token, word_embedding in zip(tokens, word_embeddings):
            token.set_embedding(self.name, word_embedding)


class LanguageModel(nn.Module):
    """A (frozen) word-level LSTM language model; its hidden states are the contextual embeddings."""

    def __init__(self, vocab, is_forward_lm, embedding_size=32, hidden_size=128):
        super().__init__()
        self.dictionary = {w: i + 1 for i, w in enumerate(vocab)}
        self.is_forward_lm = is_forward_lm
        self.encoder = nn.Embedding(len(vocab) + 1, embedding_size, padding_idx=0)
        self.rnn = nn.LSTM(embedding_size, hidden_size, batch_first=True)
        self.hidden_size = hidden_size

    def get_representation(self, sentences):
        longest = max(len(s) for s in sentences)
        ids = torch.zeros(len(sentences), longest, dtype=torch.long)
        for i, s in enumerate(sentences):
            words = [self.dictionary[t.text] for t in s]
            if not self.is_forward_lm:
                words = words[::-1]
            ids[i, :len(words)] = torch.tensor(words)
        output, _ = self.rnn(self.encoder(ids))
        return output


class FlairEmbeddings:
    def __init__(self, lm, name):
        self.lm = lm.eval()
        self.name = name
        self.embedding_length = lm.hidden_size

    def embed(self, sentences):
        todo = [s for s in sentences if not all(self.name in t._embeddings for t in s)]
        if not todo:
            return
        with torch.no_grad():
            all_hidden_states_in_lm = self.lm.get_representation(todo)
        for i, sentence in enumerate(todo):
            n = len(sentence)
            for j, token in enumerate(sentence):
                pos = j if self.lm.is_forward_lm else n - 1 - j
                token.set_embedding(self.name, all_hidden_states_in_lm[i, pos, :])


class StackedEmbeddings:
    def __init__(self, embeddings):
        self.embeddings = embeddings
        self.embedding_length = sum(e.embedding_length for e in embeddings)

    def embed(self, sentences):
        for embedding in self.embeddings:
            embedding.embed(sentences)


class SequenceTagger(nn.Module):
    def __init__(self, hidden_size, embeddings, tag_dictionary, tag_type):
        super().__init__()
        self.embeddings = embeddings
        self.tag_dictionary = tag_dictionary
        self.tag_type = tag_type
        self.embedding2nn = nn.Linear(embeddings.embedding_length, 64)
        self.rnn = nn.LSTM(64, hidden_size, batch_first=True, bidirectional=True)
        self.linear = nn.Linear(hidden_size * 2, len(tag_dictionary))
        self.loss_function = nn.CrossEntropyLoss(ignore_index=-100)

    def forward(self, sentences):
        self.embeddings.embed(sentences)
        longest = max(len(s) for s in sentences)
        sentence_tensor = torch.zeros(len(sentences), longest, self.embeddings.embedding_length)
        for i, sentence in enumerate(sentences):
            sentence_tensor[i, :len(sentence)] = torch.stack([t.get_embedding() for t in sentence])
        features = self.embedding2nn(sentence_tensor)
        features, _ = self.rnn(features)
        return self.linear(features)

    def forward_loss(self, sentences):
        scores = self.forward(sentences)
        targets = torch.full(scores.shape[:2], -100, dtype=torch.long)
        for i, sentence in enumerate(sentences):
            targets[i, :len(sentence)] = torch.tensor([self.tag_dictionary[t.tags[self.tag_type]] for t in sentence])
        return self.loss_function(scores.reshape(-1, scores.shape[-1]), targets.reshape(-1)), scores, targets


def clear_embeddings(sentences, also_clear_word_embeddings=False):
    for sentence in sentences:
        sentence.clear_embeddings(also_clear_word_embeddings=also_clear_word_embeddings)


class ModelTrainer:
    def __init__(self, model, corpus):
        self.model = model
        self.corpus = corpus

    def train(self, base_path, learning_rate=0.1, mini_batch_size=32, max_epochs=100,
              embeddings_in_memory=True):
        print('Model training base path: "%s"' % base_path)
        print('Parameters: learning_rate %s, mini_batch_size %d, max_epochs %d'
              % (learning_rate, mini_batch_size, max_epochs))
        optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate)
        train_data = self.corpus['train']
        for epoch in range(max_epochs):
            self.model.train()
            random.shuffle(train_data)
            batches = [train_data[x:x + mini_batch_size] for x in range(0, len(train_data), mini_batch_size)]
            train_loss, correct, seen = 0.0, 0, 0
            for batch_no, batch in enumerate(batches):
                optimizer.zero_grad()
                loss, scores, targets = self.model.forward_loss(batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                optimizer.step()
                train_loss += loss.item()
                mask = targets != -100
                correct += (scores.argmax(-1)[mask] == targets[mask]).sum().item()
                seen += mask.sum().item()

                clear_embeddings(batch, also_clear_word_embeddings=not embeddings_in_memory)

                if batch_no % 10 == 0:
                    print('epoch %d - iter %d/%d - loss %.8f - accuracy %.4f'
                          % (epoch + 1, batch_no, len(batches), train_loss / (batch_no + 1), correct / seen))
            print('EPOCH %d done: loss %.4f - accuracy %.4f' % (epoch + 1, train_loss / len(batches), correct / seen))


if __name__ == '__main__':
    sentences, vocab = make_corpus(5000)
    corpus = {'train': sentences[:4600], 'dev': sentences[4600:]}
    print('Corpus: %d train + %d dev sentences' % (len(corpus['train']), len(corpus['dev'])))
    tag_dictionary = {t: i for i, t in enumerate(TAGS)}

    embeddings = StackedEmbeddings([
        WordEmbeddings(vocab, 'glove'),
        WordEmbeddings(vocab, 'crawl'),
        FlairEmbeddings(LanguageModel(vocab, is_forward_lm=True), 'news-forward'),
        FlairEmbeddings(LanguageModel(vocab, is_forward_lm=False), 'news-backward'),
    ])
    tagger = SequenceTagger(hidden_size=32, embeddings=embeddings, tag_dictionary=tag_dictionary, tag_type='pos')

    trainer = ModelTrainer(tagger, corpus)
    with tempfile.TemporaryDirectory() as base_path:
        trainer.train(base_path, learning_rate=0.1, mini_batch_size=64, max_epochs=2,
                      embeddings_in_memory=True)
