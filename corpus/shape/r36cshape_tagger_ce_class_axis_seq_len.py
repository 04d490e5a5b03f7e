"""BiLSTM sequence tagger on synthetic tagged sentences (fixed length 12, 12 tags)."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 200
N_TAGS = 12
SEQ_LEN = 12
WORD_TAG = torch.randint(0, N_TAGS, (VOCAB,))


class TaggedSentences(Dataset):
    def __init__(self, n):
        self.words = torch.randint(1, VOCAB, (n, SEQ_LEN))
        prev = torch.roll(self.words, 1, dims=1)
        prev[:, 0] = 0
        self.tags = (WORD_TAG[self.words] + (prev % 2)) % N_TAGS

    def __len__(self):
        return len(self.words)

    def __getitem__(self, i):
        return self.words[i], self.tags[i]


class Tagger(nn.Module):
    def __init__(self, emb=64, hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.hidden2tag = nn.Linear(2 * hidden, N_TAGS)

    def forward(self, x):
        h, _ = self.lstm(self.embedding(x))
        return self.hidden2tag(h)


train_loader = DataLoader(TaggedSentences(2048), batch_size=64, shuffle=True)
val_loader = DataLoader(TaggedSentences(512), batch_size=128)

model = Tagger()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(5):
    model.train()
    total = 0.0
    for words, tags in train_loader:
        optimizer.zero_grad()
        scores = model(words)
        loss = criterion(scores, tags)
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    correct, count = 0, 0
    with torch.no_grad():
        for words, tags in val_loader:
            pred = model(words).argmax(-1)
            correct += (pred == tags).sum().item()
            count += tags.numel()
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val tag acc {correct / count:.3f}")
