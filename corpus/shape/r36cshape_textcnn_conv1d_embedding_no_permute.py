"""TextCNN sentence classifier (Kim 2014 style, Conv1d over word embeddings) on synthetic
token sequences with keyword-driven labels."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB_SIZE = 1000
MAX_LEN = 50
EMBED_DIM = 128
N_CLASSES = 4


class NewsDataset(Dataset):
    def __init__(self, n):
        self.tokens = torch.randint(N_CLASSES + 1, VOCAB_SIZE, (n, MAX_LEN))
        self.labels = torch.randint(0, N_CLASSES, (n,))
        for i in range(n):
            pos = torch.randint(0, MAX_LEN, (3,))
            self.tokens[i, pos] = self.labels[i] + 1

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.tokens[idx], self.labels[idx]


class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, n_filters=64, kernel_sizes=(3, 4, 5), n_classes=N_CLASSES):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.convs = nn.ModuleList([nn.Conv1d(embed_dim, n_filters, k) for k in kernel_sizes])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(n_filters * len(kernel_sizes), n_classes)

    def forward(self, x):
        x = self.embedding(x)
        x = [F.relu(conv(x)) for conv in self.convs]
        x = [F.max_pool1d(c, c.size(2)).squeeze(2) for c in x]
        x = torch.cat(x, 1)
        return self.fc(self.dropout(x))


train_loader = DataLoader(NewsDataset(1600), batch_size=64, shuffle=True)
test_loader = DataLoader(NewsDataset(400), batch_size=200)

model = TextCNN(VOCAB_SIZE, EMBED_DIM)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    model.train()
    total_loss = 0.0
    for step, (tokens, labels) in enumerate(train_loader):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = criterion(logits, labels)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    model.eval()
    correct = 0
    with torch.no_grad():
        for tokens, labels in test_loader:
            correct += (model(tokens).argmax(1) == labels).sum().item()
    print(f"epoch {epoch} loss {total_loss / len(train_loader):.4f} test acc {correct / 400:.3f}")
