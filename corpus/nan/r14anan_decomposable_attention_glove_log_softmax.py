"""Decomposable attention (Parikh et al., 2016) for sentence-pair classification, trained on
frozen pre-trained word vectors with a learned projection.

The claim/evidence pairs are generated here: each evidence sentence restates one of six
relations of the claim with a synonym, among filler words, and the label is that relation.
"""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 2000
EMBEDDING_DIM = 300
PROJECT_DIM = 200
N_LABELS = 6
SEQ = 20


def load_pretrained_vectors(vocab_size, dim, seed=7):
    """Stand-in for the GloVe 840B file: vectors with GloVe's scale (norms around 6-8)."""
    g = torch.Generator().manual_seed(seed)
    vecs = torch.randn(vocab_size, dim, generator=g) * 0.4
    vecs[:, :8] += torch.randn(vocab_size, 8, generator=g) * 2.0
    vecs[0] = 0.0
    return vecs


class PairDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.premise = torch.randint(20, VOCAB, (n, SEQ), generator=g)
        self.hypothesis = torch.randint(20, VOCAB, (n, SEQ), generator=g)
        self.label = torch.randint(0, N_LABELS, (n,), generator=g)
        for i in range(n):
            c = int(self.label[i])
            p = torch.randint(0, SEQ, (2,), generator=g)
            self.premise[i, p[0]] = 1 + 3 * c
            self.hypothesis[i, p[1]] = 2 + 3 * c + int(torch.randint(0, 2, (1,), generator=g))

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return self.premise[i], self.hypothesis[i], self.label[i]


def feedforward(inp, hidden):
    return nn.Sequential(nn.Dropout(0.2), nn.Linear(inp, hidden), nn.ReLU(),
                         nn.Dropout(0.2), nn.Linear(hidden, hidden), nn.ReLU())


class DecomposableAttention(nn.Module):
    def __init__(self, pretrained):
        super().__init__()
        self.token_embedding = nn.Embedding.from_pretrained(pretrained, freeze=True, padding_idx=0)
        self.projection = nn.Linear(EMBEDDING_DIM, PROJECT_DIM)
        self.attend_feedforward = feedforward(PROJECT_DIM, 200)
        self.compare_feedforward = feedforward(2 * PROJECT_DIM, 200)
        self.aggregate_feedforward = nn.Sequential(feedforward(400, 200), nn.Linear(200, N_LABELS))

    def forward(self, premise, hypothesis):
        embedded_premise = self.projection(self.token_embedding(premise))
        embedded_hypothesis = self.projection(self.token_embedding(hypothesis))
        projected_premise = self.attend_feedforward(embedded_premise)
        projected_hypothesis = self.attend_feedforward(embedded_hypothesis)
        similarity_matrix = projected_premise.bmm(projected_hypothesis.transpose(1, 2))
        p2h_attention = F.softmax(similarity_matrix, dim=-1)
        attended_hypothesis = p2h_attention.bmm(embedded_hypothesis)
        h2p_attention = F.softmax(similarity_matrix.transpose(1, 2), dim=-1)
        attended_premise = h2p_attention.bmm(embedded_premise)
        compared_premise = self.compare_feedforward(torch.cat([embedded_premise, attended_hypothesis], dim=-1)).sum(1)
        compared_hypothesis = self.compare_feedforward(torch.cat([embedded_hypothesis, attended_premise], dim=-1)).sum(1)
        aggregate_input = torch.cat([compared_premise, compared_hypothesis], dim=-1)
        return self.aggregate_feedforward(aggregate_input)


def main():
    train_loader = DataLoader(PairDataset(1920, seed=1), batch_size=32, shuffle=True)
    val_loader = DataLoader(PairDataset(640, seed=2), batch_size=128)
    model = DecomposableAttention(load_pretrained_vectors(VOCAB, EMBEDDING_DIM))
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    start = time.time()
    step = 0
    for epoch in range(2):
        model.train()
        for premise, hypothesis, label in train_loader:
            labels = F.one_hot(label, N_LABELS)
            label_logits_squeezed = model(premise, hypothesis)
            label_probs = torch.nn.functional.softmax(label_logits_squeezed, dim=-1)
            log_label_probs = -torch.log(label_probs)
            loss = log_label_probs * labels.float()
            loss = torch.sum(loss) / label.size(0)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")
            step += 1
        model.eval()
        correct = 0
        with torch.no_grad():
            for premise, hypothesis, label in val_loader:
                correct += (model(premise, hypothesis).argmax(-1) == label).sum().item()
        print(f"epoch {epoch} val acc {correct / 640:.3f} ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
