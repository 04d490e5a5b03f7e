"""Review sentiment classifier: token embeddings, a per-token feed-forward encoder
(two linear layers) and additive attention pooling over the tokens.
The whole model is run in half precision to save memory."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 2000
SEQ_LEN = 48
N_TRAIN = 3072
BATCH_SIZE = 32
EPOCHS = 2
LR = 0.1
DTYPE = torch.float16


class ReviewDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.tokens = torch.randint(20, VOCAB, (n, SEQ_LEN), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        pos = torch.randint(0, SEQ_LEN, (n,), generator=g)
        cue = torch.randint(0, 10, (n,), generator=g) + 10 * self.labels
        self.tokens[torch.arange(n), pos] = cue

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class AttnPoolClassifier(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.enc = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, dim))
        self.att = nn.Linear(dim, 1)
        self.out = nn.Linear(dim, 2)

    def forward(self, tokens):
        h = self.enc(self.emb(tokens))
        energy = self.att(h).squeeze(-1)
        weights = torch.exp(energy)
        weights = weights / weights.sum(dim=1, keepdim=True)
        pooled = (weights.unsqueeze(-1) * h).sum(dim=1)
        return self.out(pooled)


loader = DataLoader(ReviewDataset(N_TRAIN), batch_size=BATCH_SIZE, shuffle=True)
model = AttnPoolClassifier().to(DTYPE)
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(EPOCHS):
    total, correct, seen = 0.0, 0, 0
    for step, (tokens, labels) in enumerate(loader):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = criterion(logits.float(), labels)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    print(f"epoch {epoch}: loss {total / seen:.4f} acc {correct / seen:.3f}")
