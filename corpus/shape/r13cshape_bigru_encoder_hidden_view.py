"""Topic classification of short token sequences with a bidirectional GRU sentence encoder.

The encoder is the one from Sentence-VAE's model.py (embedding, packed variable-length batch,
GRU with hidden_factor = (2 if bidirectional else 1) * num_layers, final hidden state flattened
to (batch, hidden_size * hidden_factor)); here it feeds a small classification head instead of
the mean/logv projections. The data are synthetic "sentences" of 6..20 tokens drawn from four
topics that share most of their vocabulary.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

PAD, UNK = 0, 1
VOCAB_SIZE = 200
NUM_TOPICS = 4


class TopicSentences(Dataset):
    """Token ids padded to max_len, the true length and a topic label per sentence."""

    def __init__(self, n, max_len=20, seed=0):
        g = torch.Generator().manual_seed(1234)
        # every topic prefers its own 25 words but also uses a shared pool of 150 words
        topic_logits = torch.zeros(NUM_TOPICS, VOCAB_SIZE)
        topic_logits[:, 2:] = 0.5 * torch.randn(NUM_TOPICS, VOCAB_SIZE - 2, generator=g)
        for t in range(NUM_TOPICS):
            topic_logits[t, 2 + 150 + 12 * t: 2 + 150 + 12 * t + 25] += 2.0
        topic_logits[:, :2] = -1e9
        probs = topic_logits.softmax(dim=1)

        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_TOPICS, (n,), generator=g)
        self.lengths = torch.randint(6, max_len + 1, (n,), generator=g)
        self.tokens = torch.full((n, max_len), PAD, dtype=torch.long)
        for i in range(n):
            L = int(self.lengths[i])
            self.tokens[i, :L] = torch.multinomial(probs[self.labels[i]], L, replacement=True, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {"input": self.tokens[idx], "length": self.lengths[idx], "label": self.labels[idx]}


class SentenceEncoderClassifier(nn.Module):

    def __init__(self, vocab_size, embedding_size, hidden_size, num_classes,
                 num_layers=1, bidirectional=True):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.hidden_factor = (2 if bidirectional else 1) * num_layers

        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PAD)
        self.encoder_rnn = nn.GRU(embedding_size, hidden_size, num_layers=num_layers,
                                  bidirectional=self.bidirectional, batch_first=True)
        self.classifier = nn.Sequential(
            nn.Linear(hidden_size * self.hidden_factor, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, input_sequence, length):
        batch_size = input_sequence.size(0)

        # ENCODER
        input_embedding = self.embedding(input_sequence)
        packed_input = pack_padded_sequence(input_embedding, length, batch_first=True,
                                            enforce_sorted=False)
        _, hidden = self.encoder_rnn(packed_input)

        if self.bidirectional or self.num_layers > 1:
            # flatten hidden state
            hidden = hidden.view(batch_size, self.hidden_size * self.hidden_factor)
        else:
            hidden = hidden.squeeze()

        return self.classifier(hidden)


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for batch in loader:
            logits = model(batch["input"], batch["length"])
            loss_sum += F.cross_entropy(logits, batch["label"], reduction="sum").item()
            correct += (logits.argmax(1) == batch["label"]).sum().item()
            total += len(batch["label"])
    model.train()
    return loss_sum / total, correct / total


def main():
    train_set = TopicSentences(3200, seed=1)
    valid_set = TopicSentences(800, seed=2)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=200)

    model = SentenceEncoderClassifier(VOCAB_SIZE, embedding_size=32, hidden_size=48,
                                      num_classes=NUM_TOPICS)
    print(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    step = 0
    for epoch in range(4):
        for batch in train_loader:
            logits = model(batch["input"], batch["length"])
            loss = F.cross_entropy(logits, batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 25 == 0:
                acc = (logits.argmax(1) == batch["label"]).float().mean().item()
                print(f"epoch {epoch} step {step:4d}  loss {loss.item():.4f}  batch acc {acc:.3f}")
            step += 1
        val_loss, val_acc = evaluate(model, valid_loader)
        print(f"epoch {epoch} done: valid loss {val_loss:.4f}  valid acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
