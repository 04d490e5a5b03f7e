"""TransE knowledge-graph embedding: train with a margin ranking loss and corrupted triples,
then run link-prediction validation (rank the true tail / head among all entities: mean rank,
MRR, Hits@10). A synthetic graph with typed relations stands in for FB15K."""
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--dim', type=int, default=64)
parser.add_argument('--batch_size', type=int, default=512)
parser.add_argument('--margin', type=float, default=1.0)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--max_epoch', type=int, default=4)
parser.add_argument('--eval_freq', type=int, default=4)
parser.add_argument('--top_k', type=int, default=10)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)

num_entities, num_relations = 3500, 20

# synthetic KG: entities have hidden positions; relation r links an entity to one of the
# entities nearest to its position moved by the relation's offset
latent = np.random.randn(num_entities, 8).astype(np.float32)
rel_offset = np.random.randn(num_relations, 8).astype(np.float32)
heads = np.random.randint(0, num_entities, size=24000)
rels = np.random.randint(0, num_relations, size=24000)
tails = np.empty_like(heads)
for s in range(0, len(heads), 1000):
    target = latent[heads[s:s + 1000]] + rel_offset[rels[s:s + 1000]]
    d = (target ** 2).sum(1)[:, None] + (latent ** 2).sum(1)[None, :] - 2 * target @ latent.T
    nearest = np.argsort(d, axis=1)[:, :3]
    tails[s:s + 1000] = nearest[np.arange(len(nearest)), np.random.randint(0, 3, size=len(nearest))]
triples = np.unique(np.stack([heads, rels, tails], 1), axis=0)
np.random.shuffle(triples)
valid_relation_triples_list = triples[:1900]
train_triples = triples[1900:]
print(f'entities {num_entities}, relations {num_relations}, train triples {len(train_triples)}, '
      f'valid triples {len(valid_relation_triples_list)}')


class TransE(nn.Module):
    def __init__(self, n_ent, n_rel, dim):
        super().__init__()
        self.ent_embeddings = nn.Embedding(n_ent, dim)
        self.rel_embeddings = nn.Embedding(n_rel, dim)
        nn.init.xavier_uniform_(self.ent_embeddings.weight)
        nn.init.xavier_uniform_(self.rel_embeddings.weight)

    def calc(self, h, r, t):
        score = (h + r) - t
        return torch.norm(score, p=1, dim=-1)

    def forward(self, h, r, t):
        return self.calc(self.ent_embeddings(h), self.rel_embeddings(r), self.ent_embeddings(t))

    def get_embeddings(self, h, r, t):
        h_embeds = self.ent_embeddings(h).unsqueeze(1)
        r_embeds = self.rel_embeddings(r).unsqueeze(1)
        t_embeds = self.ent_embeddings(t).unsqueeze(1)
        candidates = self.ent_embeddings.weight.unsqueeze(0)
        return h_embeds, r_embeds, t_embeds, candidates

    def get_score(self, h, r, t):
        return self.calc(h, r, t)


def task_divide(idx, n):
    total = len(idx)
    if n <= 0 or 0 == total:
        return [idx]
    if n > total:
        return [idx]
    elif n == total:
        return [[i] for i in idx]
    else:
        j = total // n
        tasks = []
        for i in range(0, (n - 1) * j, j):
            tasks.append(idx[i:i + j])
        tasks.append(idx[(n - 1) * j:])
        return tasks


def get_rank(score, target):
    true_score = score[np.arange(len(target)), target]
    return (score < true_score[:, None]).sum(1) + 1


def evaluate(model):
    model.eval()
    ranks = []
    n = int(len(valid_relation_triples_list) / 1000)
    kg1_list = task_divide(valid_relation_triples_list, n)
    with torch.no_grad():
        for triple_batch in kg1_list:
            head = torch.as_tensor(triple_batch[:, 0])
            relation = torch.as_tensor(triple_batch[:, 1])
            tail = torch.as_tensor(triple_batch[:, 2])
            h_embeds, r_embeds, t_embeds, candidates = model.get_embeddings(head, relation, tail)
            score = model.get_score(h_embeds, r_embeds, candidates).numpy()
            ranks.append(get_rank(score, tail.numpy()))
            score = model.get_score(candidates, r_embeds, t_embeds).numpy()
            ranks.append(get_rank(score, head.numpy()))
    model.train()
    ranks = np.concatenate(ranks).astype(np.float64)
    return ranks.mean(), (1.0 / ranks).mean(), (ranks <= args.top_k).mean()


model = TransE(num_entities, num_relations, args.dim)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
train_t = torch.as_tensor(train_triples)

for epoch in range(1, args.max_epoch + 1):
    perm = torch.randperm(len(train_t))
    total_loss, steps = 0.0, 0
    for i in range(0, len(train_t), args.batch_size):
        batch = train_t[perm[i:i + args.batch_size]]
        h, r, t = batch[:, 0], batch[:, 1], batch[:, 2]
        corrupt = torch.randint(0, num_entities, (len(batch),))
        flip = torch.rand(len(batch)) < 0.5
        nh = torch.where(flip, corrupt, h)
        nt = torch.where(flip, t, corrupt)
        pos = model(h, r, t)
        neg = model(nh, r, nt)
        loss = F.relu(args.margin + pos - neg).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.ent_embeddings.weight.data = F.normalize(model.ent_embeddings.weight.data, dim=1)
        total_loss += loss.item()
        steps += 1
    print(f'epoch {epoch}, avg. triple loss: {total_loss / steps:.4f}')
    if epoch % args.eval_freq == 0:
        mr, mrr, hits = evaluate(model)
        print(f'  valid: Mean Rank {mr:.1f} | MRR {mrr:.3f} | Hit@{args.top_k} {hits:.3f}')
