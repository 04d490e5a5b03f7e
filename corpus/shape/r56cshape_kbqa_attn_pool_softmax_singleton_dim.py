"""Question -> relation classifier for KBQA: a BiGRU over the question tokens with
attention pooling, trained to predict which KB relation the question asks about.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 200
NUM_REL = 8
SEQ_LEN = 24
EMB = 32
HID = 24


class QuestionDataset(Dataset):
    """Filler words everywhere; one 'relation word' (ids 10..89) at a random position decides the label."""

    def __init__(self, n):
        self.q = torch.randint(90, VOCAB, (n, SEQ_LEN))
        rel_word = torch.randint(10, 90, (n,))
        pos = torch.randint(0, SEQ_LEN, (n,))
        self.q[torch.arange(n), pos] = rel_word
        self.y = (rel_word - 10) % NUM_REL

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.q[i], self.y[i]


class RelationEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.GRU(EMB, HID, bidirectional=True)
        self.attn = nn.Linear(EMB + 2 * HID, 1)
        self.out = nn.Linear(2 * HID, NUM_REL)

    def forward(self, q):
        x = self.embed(q.t())                      # (seq, batch, emb)
        outputs, _ = self.rnn(x)                   # (seq, batch, 2*hid)
        seq_len, batch = q.t().shape
        x = x.view(seq_len * batch, -1)
        outputs = outputs.view(seq_len * batch, -1)
        attn_weights = F.softmax(self.attn(torch.cat((x, outputs), 1)), dim=1)
        attn_weights = attn_weights.view(seq_len, batch, 1)
        pooled = (attn_weights * outputs.view(seq_len, batch, -1)).sum(dim=0)
        return self.out(pooled)


train_loader = DataLoader(QuestionDataset(3200), batch_size=32, shuffle=True)
val_loader = DataLoader(QuestionDataset(800), batch_size=200)

model = RelationEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
criterion = nn.CrossEntropyLoss()

step = 0
for epoch in range(2):
    model.train()
    total = 0.0
    for q, y in train_loader:
        logits = model(q)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if step % 25 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    correct = 0
    with torch.no_grad():
        for q, y in val_loader:
            correct += (model(q).argmax(1) == y).sum().item()
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val acc {correct / len(val_loader.dataset):.3f}")
