"""Pairwise NLI classifier (premise / hypothesis) with a self-attentive pooler over the joint
token sequence, batched like MT-DNN's BatchGen. Synthetic sentence pairs stand in for MNLI."""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

random.seed(0)
torch.manual_seed(0)

VOCAB = 400
CLS, SEP, PAD = 1, 2, 0
N_CLASSES = 3


def make_pairs(n):
    data = []
    for _ in range(n):
        label = random.randrange(N_CLASSES)
        premise = [random.randint(10, 299) for _ in range(random.randint(6, 14))]
        if label == 0:
            hyp = random.sample(premise, min(len(premise), random.randint(3, 6)))
        elif label == 1:
            hyp = random.sample(premise, 2) + [random.randint(300, VOCAB - 1) for _ in range(random.randint(2, 5))]
        else:
            hyp = [random.randint(300, VOCAB - 1) for _ in range(random.randint(4, 8))]
        data.append({'token_id': [CLS] + premise + [SEP] + hyp + [SEP], 'premise_len': len(premise) + 2, 'label': label})
    return data


class BatchGen:
    def __init__(self, data, batch_size=32, shuffle=True):
        self.data, self.batch_size, self.shuffle = data, batch_size, shuffle

    def __iter__(self):
        idx = list(range(len(self.data)))
        if self.shuffle:
            random.shuffle(idx)
        for i in range(0, len(idx), self.batch_size):
            batch = [self.data[k] for k in idx[i:i + self.batch_size]]
            batch_size = len(batch)
            tok_len = max(len(s['token_id']) for s in batch)
            premise_len = max(s['premise_len'] for s in batch)
            token_ids = torch.LongTensor(batch_size, tok_len).fill_(PAD)
            premise_masks = torch.ByteTensor(batch_size, premise_len).fill_(1)
            for j, s in enumerate(batch):
                token_ids[j, :len(s['token_id'])] = torch.LongTensor(s['token_id'])
                premise_masks[j, :s['premise_len']] = 0
            labels = torch.LongTensor([s['label'] for s in batch])
            yield token_ids, premise_masks, labels


class SelfAttnWrapper(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, 1)

    def forward(self, x, x_mask):
        xWy = self.linear(x).squeeze(-1)
        xWy.data.masked_fill_(x_mask.data.bool(), -float('inf'))
        alpha = F.softmax(xWy, dim=1)
        return alpha.unsqueeze(1).bmm(x).squeeze(1)


class PairClassifier(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hidden, padding_idx=PAD)
        self.encoder = nn.GRU(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.pooler = SelfAttnWrapper(hidden)
        self.classifier = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, N_CLASSES))

    def forward(self, token_ids, premise_masks):
        h, _ = self.encoder(self.embedding(token_ids))
        pooled = self.pooler(h, premise_masks)
        return self.classifier(torch.cat([pooled, h[:, 0]], dim=1))


train_data, dev_data = make_pairs(1600), make_pairs(320)
model = PairClassifier()
optimizer = torch.optim.Adamax(model.parameters(), lr=5e-3)

for epoch in range(5):
    model.train()
    total, steps = 0.0, 0
    for token_ids, premise_masks, labels in BatchGen(train_data):
        logits = model(token_ids, premise_masks)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        steps += 1
    model.eval()
    correct = 0
    with torch.no_grad():
        for token_ids, premise_masks, labels in BatchGen(dev_data, shuffle=False):
            correct += (model(token_ids, premise_masks).argmax(1) == labels).sum().item()
    print(f"epoch {epoch}: train loss {total / steps:.4f}  dev acc {correct / len(dev_data):.3f}")
