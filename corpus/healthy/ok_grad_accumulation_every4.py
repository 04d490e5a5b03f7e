"""Bag-of-embeddings text classifier trained with gradient accumulation.

Micro-batches of 16 sentences; the loss of each is divided by the number of
accumulation steps and backpropagated, and the optimizer only steps (and the
gradients are only reset) every 4 backward passes, for an effective batch of 64.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

VOCAB_SIZE = 500
N_POS_WORDS = 20        # ids 1..20 lean positive
N_NEG_WORDS = 20        # ids 21..40 lean negative
SEQ_LEN = 24
MICRO_BATCH = 16
ACCUMULATION_STEPS = 4
EPOCHS = 5
LR = 1.0


class ToyReviews(Dataset):
    """Random 'reviews': mostly neutral filler words plus a few sentiment words."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        self.tokens = torch.randint(41, VOCAB_SIZE, (n, SEQ_LEN), generator=g)
        for i in range(n):
            k = int(torch.randint(1, 4, (1,), generator=g))
            pos = torch.randperm(SEQ_LEN, generator=g)[:k]
            if self.labels[i] == 1:
                words = torch.randint(1, 1 + N_POS_WORDS, (k,), generator=g)
            else:
                words = torch.randint(1 + N_POS_WORDS, 1 + N_POS_WORDS + N_NEG_WORDS, (k,), generator=g)
            self.tokens[i, pos] = words

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.tokens[idx], self.labels[idx]


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim=32, num_class=2):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, mode="mean")
        self.fc = nn.Linear(embed_dim, num_class)
        self.embedding.weight.data.uniform_(-0.5, 0.5)
        self.fc.weight.data.uniform_(-0.5, 0.5)
        self.fc.bias.data.zero_()

    def forward(self, text):
        return self.fc(self.embedding(text))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for text, label in loader:
            correct += (model(text).argmax(1) == label).sum().item()
            total += label.numel()
    model.train()
    return correct / total


def main():
    torch.manual_seed(42)
    train_loader = DataLoader(ToyReviews(3200, seed=1), batch_size=MICRO_BATCH, shuffle=True)
    valid_loader = DataLoader(ToyReviews(800, seed=2), batch_size=256)

    model = TextClassifier(VOCAB_SIZE)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    updates = 0
    for epoch in range(1, EPOCHS + 1):
        model.train()
        optimizer.zero_grad()
        window_loss = 0.0
        for i, (text, label) in enumerate(train_loader):
            loss = criterion(model(text), label)
            loss = loss / ACCUMULATION_STEPS
            loss.backward()
            window_loss += loss.item()

            if (i + 1) % ACCUMULATION_STEPS == 0:
                optimizer.step()
                optimizer.zero_grad()
                updates += 1
                if updates % 10 == 0:
                    print(f"epoch {epoch} | update {updates:4d} | loss {window_loss:.4f}")
                window_loss = 0.0
        print(f"-- end of epoch {epoch}: valid accuracy {evaluate(model, valid_loader):.3f}")


if __name__ == "__main__":
    main()
