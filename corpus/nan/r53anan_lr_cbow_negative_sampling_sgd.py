"""CBOW word embeddings with negative sampling on a small synthetic corpus.

The context words (window 2 on each side) are averaged and scored against the centre word and
a handful of noise words drawn from the unigram^0.75 distribution, then trained with plain SGD."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(42)
np.random.seed(42)

VOCAB_SIZE = 400
EMBED_DIM = 64
WINDOW = 2
NUM_NEG = 5
BATCH_SIZE = 128
LEARNING_RATE = 1.0
EPOCHS = 4


def build_corpus(n_sentences=1200, n_topics=8):
    words_per_topic = VOCAB_SIZE // n_topics
    zipf = 1.0 / np.arange(1, words_per_topic + 1)
    zipf /= zipf.sum()
    sentences = []
    for _ in range(n_sentences):
        topic = np.random.randint(n_topics)
        length = np.random.randint(6, 14)
        ids = topic * words_per_topic + np.random.choice(words_per_topic, size=length, p=zipf)
        sentences.append(ids.tolist())
    return sentences


class CBOWDataset(Dataset):
    def __init__(self, sentences):
        self.samples = []
        for sent in sentences:
            for i in range(WINDOW, len(sent) - WINDOW):
                context = sent[i - WINDOW:i] + sent[i + 1:i + 1 + WINDOW]
                self.samples.append((context, sent[i]))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        context, target = self.samples[idx]
        return torch.tensor(context), torch.tensor(target)


class CBOW(nn.Module):
    def __init__(self, vocab_size, embed_dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, embed_dim)
        self.out_embed = nn.Embedding(vocab_size, embed_dim)
        self.in_embed.weight.data.uniform_(-1.0, 1.0)
        self.out_embed.weight.data.uniform_(-1.0, 1.0)

    def forward(self, context, target, negatives):
        h = self.in_embed(context).mean(dim=1)
        pos = (h * self.out_embed(target)).sum(-1)
        neg = torch.bmm(self.out_embed(negatives), h.unsqueeze(2)).squeeze(2)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).sum()


def main():
    sentences = build_corpus()
    counts = np.bincount(np.concatenate([np.array(s) for s in sentences]), minlength=VOCAB_SIZE)
    noise = torch.tensor(counts ** 0.75, dtype=torch.float)
    noise /= noise.sum()

    dataset = CBOWDataset(sentences)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
    model = CBOW(VOCAB_SIZE, EMBED_DIM)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    print(f"{len(dataset)} training pairs, {len(loader)} batches per epoch")

    step = 0
    running = 0.0
    for epoch in range(EPOCHS):
        for context, target in loader:
            negatives = torch.multinomial(noise, target.size(0) * NUM_NEG, replacement=True).view(-1, NUM_NEG)
            loss = model(context, target, negatives)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch + 1} step {step:4d}  loss {running / 20:.4f}")
                running = 0.0

        with torch.no_grad():
            emb = F.normalize(model.in_embed.weight, dim=1)
            topic = torch.arange(VOCAB_SIZE) // (VOCAB_SIZE // 8)
            sim = emb[:40] @ emb.t()
            sim[torch.arange(40), torch.arange(40)] = -2.0
            nearest = sim.argmax(dim=1)
            acc = (topic[nearest] == topic[:40]).float().mean().item()
        print(f"epoch {epoch + 1} done, nearest-neighbour same-topic rate {acc:.3f}")


if __name__ == "__main__":
    main()
