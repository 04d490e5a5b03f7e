"""TransE knowledge-graph embedding trained with stochastic local closed-world negative sampling
(sLCWA) and a margin ranking loss, evaluated by tail prediction (MRR, Hits@10).
A synthetic translational knowledge graph stands in for FB15k-237."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_ENTITIES = 300
NUM_RELATIONS = 12
EMBEDDING_DIM = 32
NUM_NEG_PER_POS = 16
BATCH_SIZE = 128
MARGIN = 1.0
EPOCHS = 12


def make_graph():
    ent = torch.randn(NUM_ENTITIES, 6)
    rel = 1.5 * torch.randn(NUM_RELATIONS, 6)
    triples = []
    for r in range(NUM_RELATIONS):
        heads = torch.randperm(NUM_ENTITIES)[:150]
        target = ent[heads] + rel[r]
        tails = torch.cdist(target, ent).argmin(dim=1)
        for h, t in zip(heads.tolist(), tails.tolist()):
            triples.append((h, r, t))
    triples = torch.tensor(triples)
    return triples[torch.randperm(len(triples))]


triples = make_graph()
n_test = 200
train_triples, test_triples = triples[n_test:], triples[:n_test]
print(f"train triples: {len(train_triples)}  test triples: {len(test_triples)}")
train_loader = DataLoader(TensorDataset(train_triples), batch_size=BATCH_SIZE, shuffle=True)


class TransE(nn.Module):
    def __init__(self, num_entities, num_relations, dim, p=1):
        super().__init__()
        self.entity_embeddings = nn.Embedding(num_entities, dim)
        self.relation_embeddings = nn.Embedding(num_relations, dim)
        bound = 6 / dim ** 0.5
        nn.init.uniform_(self.entity_embeddings.weight, -bound, bound)
        nn.init.uniform_(self.relation_embeddings.weight, -bound, bound)
        self.p = p

    def score_hrt(self, h, r, t):
        h = self.entity_embeddings(h)
        r = self.relation_embeddings(r)
        t = self.entity_embeddings(t)
        return -torch.norm(h + r - t, p=self.p, dim=-1)

    def score_t(self, h, r):
        hr = self.entity_embeddings(h) + self.relation_embeddings(r)
        return -torch.cdist(hr, self.entity_embeddings.weight, p=self.p)

    def normalize_entities(self):
        with torch.no_grad():
            self.entity_embeddings.weight.data = F.normalize(self.entity_embeddings.weight.data, dim=-1)


def corrupt(batch, num_neg):
    neg = batch.unsqueeze(1).repeat(1, num_neg, 1)
    corrupt_head = torch.rand(neg.shape[:2]) < 0.5
    random_entities = torch.randint(0, NUM_ENTITIES, neg.shape[:2])
    neg[..., 0] = torch.where(corrupt_head, random_entities, neg[..., 0])
    neg[..., 2] = torch.where(corrupt_head, neg[..., 2], random_entities)
    return neg


class MarginRankingLoss(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = margin

    def forward(self, positive_scores, negative_scores):
        # positive_scores: (batch_size, 1), negative_scores: (batch_size, num_neg_per_pos)
        positive_scores = positive_scores.unsqueeze(dim=1)
        return F.relu(self.margin + negative_scores - positive_scores).mean()


@torch.no_grad()
def evaluate(model, triples):
    scores = model.score_t(triples[:, 0], triples[:, 1])
    true_scores = scores.gather(1, triples[:, 2:3])
    ranks = (scores > true_scores).sum(dim=1).float() + 1
    return (1.0 / ranks).mean().item(), (ranks <= 10).float().mean().item()


model = TransE(NUM_ENTITIES, NUM_RELATIONS, EMBEDDING_DIM)
loss_fn = MarginRankingLoss(margin=MARGIN)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

mrr, hits = evaluate(model, test_triples)
print(f"before training: MRR {mrr:.3f}  Hits@10 {hits:.3f}")
step = 0
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for (batch,) in train_loader:
        model.normalize_entities()
        neg = corrupt(batch, NUM_NEG_PER_POS)
        pos_scores = model.score_hrt(batch[:, 0], batch[:, 1], batch[:, 2]).unsqueeze(-1)
        neg_scores = model.score_hrt(neg[..., 0], neg[..., 1], neg[..., 2])
        loss = loss_fn(pos_scores, neg_scores)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
    mrr, hits = evaluate(model, test_triples)
    print(f"epoch {epoch + 1:2d}  step {step:3d}  loss {total / len(train_loader):.4f}  "
          f"test MRR {mrr:.3f}  Hits@10 {hits:.3f}")
