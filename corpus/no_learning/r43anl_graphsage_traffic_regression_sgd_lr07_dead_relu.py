"""GraphSAGE (mean aggregator, graphsage-simple style) regressing monthly page traffic
of wiki pages from their feature vectors and the link graph (synthetic chameleon-like data)."""
import random
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init

torch.manual_seed(1)
random.seed(1)

num_nodes, feat_dim = 1500, 64
features = torch.rand(num_nodes, feat_dim) * torch.randint(1, 6, (num_nodes, 1)).float()
adj_lists = [set() for _ in range(num_nodes)]
for _ in range(6000):
    a, b = random.randrange(num_nodes), random.randrange(num_nodes)
    if a != b:
        adj_lists[a].add(b)
        adj_lists[b].add(a)
true_w = torch.randn(feat_dim) / 4
neigh_mean = torch.stack([features[list(n)].mean(0) if n else torch.zeros(feat_dim) for n in adj_lists])
target = (features @ true_w + 0.5 * neigh_mean @ true_w + 0.1 * torch.randn(num_nodes)).unsqueeze(1)


class MeanAggregator(nn.Module):
    def __init__(self, features, num_sample=10):
        super().__init__()
        self.features = features
        self.num_sample = num_sample

    def forward(self, nodes, to_neighs):
        samp_neighs = [set(random.sample(sorted(n), self.num_sample)) if len(n) >= self.num_sample else n for n in to_neighs]
        samp_neighs = [s | {nodes[i]} for i, s in enumerate(samp_neighs)]
        unique = list(set.union(*samp_neighs))
        idx = {n: i for i, n in enumerate(unique)}
        mask = torch.zeros(len(samp_neighs), len(unique))
        cols = [idx[n] for s in samp_neighs for n in s]
        rows = [i for i in range(len(samp_neighs)) for _ in range(len(samp_neighs[i]))]
        mask[rows, cols] = 1
        mask = mask / mask.sum(1, keepdim=True)
        return mask.mm(self.features(torch.LongTensor(unique)))


class Encoder(nn.Module):
    def __init__(self, features, feat_dim, embed_dim, adj_lists, aggregator):
        super().__init__()
        self.features = features
        self.adj_lists = adj_lists
        self.aggregator = aggregator
        self.weight = nn.Parameter(torch.FloatTensor(embed_dim, 2 * feat_dim))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        neigh_feats = self.aggregator.forward(nodes, [self.adj_lists[int(n)] for n in nodes])
        self_feats = self.features(torch.LongTensor(nodes))
        combined = torch.cat([self_feats, neigh_feats], dim=1)
        return F.relu(self.weight.mm(combined.t()))


class SupervisedGraphSage(nn.Module):
    def __init__(self, enc):
        super().__init__()
        self.enc = enc
        self.weight = nn.Parameter(torch.FloatTensor(1, enc.weight.shape[0]))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        return self.weight.mm(self.enc(nodes)).t()

    def loss(self, nodes, targets):
        return F.mse_loss(self.forward(nodes), targets)


feat_table = nn.Embedding(num_nodes, feat_dim)
feat_table.weight = nn.Parameter(features, requires_grad=False)
agg = MeanAggregator(feat_table)
enc = Encoder(feat_table, feat_dim, 128, adj_lists, agg)
graphsage = SupervisedGraphSage(enc)

rand_indices = list(range(num_nodes))
random.shuffle(rand_indices)
test, val, train = rand_indices[:300], rand_indices[300:600], rand_indices[600:]

optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, graphsage.parameters()), lr=0.7)
times = []
for batch in range(150):
    batch_nodes = train[:128]
    random.shuffle(train)
    start_time = time.time()
    optimizer.zero_grad()
    loss = graphsage.loss(batch_nodes, target[batch_nodes])
    loss.backward()
    optimizer.step()
    times.append(time.time() - start_time)
    if batch % 10 == 0:
        print(batch, loss.item())

with torch.no_grad():
    val_mse = F.mse_loss(graphsage.forward(val), target[val]).item()
print("Validation MSE:", val_mse)
print("Average batch time:", sum(times) / len(times))
