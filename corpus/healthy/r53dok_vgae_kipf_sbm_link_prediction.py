"""Variational graph auto-encoder (Kipf & Welling) for link prediction, after gae-pytorch's
train.py: dense normalized adjacency, two GCN layers -> mu / logvar, inner-product decoder,
weighted BCE (pos_weight, norm) + KL; validation/test edges held out and scored by ROC AUC."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

N_NODES = 240
N_BLOCKS = 4
P_IN, P_OUT = 0.15, 0.01


def make_sbm():
    block = np.repeat(np.arange(N_BLOCKS), N_NODES // N_BLOCKS)
    p = np.where(block[:, None] == block[None, :], P_IN, P_OUT)
    upper = np.triu(np.random.rand(N_NODES, N_NODES) < p, k=1)
    adj = (upper | upper.T).astype(np.float32)
    feats = np.eye(N_BLOCKS)[block] + 0.8 * np.random.randn(N_NODES, N_BLOCKS)
    feats = np.concatenate([feats, np.random.randn(N_NODES, 12)], axis=1).astype(np.float32)
    return adj, feats


def mask_test_edges(adj):
    edges = np.array(np.nonzero(np.triu(adj, k=1))).T
    perm = np.random.permutation(len(edges))
    n_test = len(edges) // 10
    n_val = len(edges) // 20
    test_edges = edges[perm[:n_test]]
    val_edges = edges[perm[n_test:n_test + n_val]]
    train_edges = edges[perm[n_test + n_val:]]
    existing = set(map(tuple, edges))

    def sample_false(k):
        out = []
        while len(out) < k:
            i, j = np.random.randint(0, N_NODES, 2)
            if i == j or (min(i, j), max(i, j)) in existing:
                continue
            out.append((i, j))
        return np.array(out)

    adj_train = np.zeros_like(adj)
    adj_train[train_edges[:, 0], train_edges[:, 1]] = 1
    adj_train = adj_train + adj_train.T
    return adj_train, val_edges, sample_false(len(val_edges)), test_edges, sample_false(len(test_edges))


def preprocess_graph(adj):
    adj_ = adj + np.eye(adj.shape[0], dtype=np.float32)
    deg_inv_sqrt = np.power(adj_.sum(1), -0.5)
    return torch.from_numpy(adj_ * deg_inv_sqrt[:, None] * deg_inv_sqrt[None, :]).float()


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, dropout=0.0, act=F.relu):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        nn.init.xavier_uniform_(self.weight)
        self.dropout = dropout
        self.act = act

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        return self.act(adj @ (x @ self.weight))


class GCNModelVAE(nn.Module):
    def __init__(self, input_feat_dim, hidden_dim1, hidden_dim2, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(input_feat_dim, hidden_dim1, dropout, act=F.relu)
        self.gc2 = GraphConvolution(hidden_dim1, hidden_dim2, dropout, act=lambda x: x)
        self.gc3 = GraphConvolution(hidden_dim1, hidden_dim2, dropout, act=lambda x: x)

    def encode(self, x, adj):
        h = self.gc1(x, adj)
        return self.gc2(h, adj), self.gc3(h, adj)

    def reparameterize(self, mu, logvar):
        if self.training:
            std = torch.exp(logvar)
            return torch.randn_like(std) * std + mu
        return mu

    def forward(self, x, adj):
        mu, logvar = self.encode(x, adj)
        z = self.reparameterize(mu, logvar)
        return z @ z.t(), mu, logvar


def loss_function(preds, labels, mu, logvar, n_nodes, norm, pos_weight):
    cost = norm * F.binary_cross_entropy_with_logits(preds, labels, pos_weight=pos_weight)
    kld = -0.5 / n_nodes * torch.mean(torch.sum(1 + 2 * logvar - mu.pow(2) - logvar.exp().pow(2), 1))
    return cost + kld


def roc_auc(pos_scores, neg_scores):
    scores = np.concatenate([pos_scores, neg_scores])
    ranks = scores.argsort().argsort() + 1
    n_pos, n_neg = len(pos_scores), len(neg_scores)
    return (ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def get_roc_score(emb, edges_pos, edges_neg):
    rec = 1 / (1 + np.exp(-emb @ emb.T))
    return roc_auc(rec[edges_pos[:, 0], edges_pos[:, 1]], rec[edges_neg[:, 0], edges_neg[:, 1]])


adj, features = make_sbm()
adj_train, val_edges, val_false, test_edges, test_false = mask_test_edges(adj)
adj_norm = preprocess_graph(adj_train)
adj_label = torch.from_numpy(adj_train + np.eye(N_NODES, dtype=np.float32))
features = torch.from_numpy(features)

pos_weight = torch.tensor(float(N_NODES * N_NODES - adj_train.sum()) / adj_train.sum())
norm = N_NODES * N_NODES / float((N_NODES * N_NODES - adj_train.sum()) * 2)
print(f"nodes {N_NODES} train edges {int(adj_train.sum() // 2)} val {len(val_edges)} test {len(test_edges)} "
      f"pos_weight {pos_weight.item():.1f}")

model = GCNModelVAE(features.shape[1], 32, 16, dropout=0.0)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

model.eval()
with torch.no_grad():
    _, mu, _ = model(features, adj_norm)
print(f"epoch 0 val_roc {get_roc_score(mu.numpy(), val_edges, val_false):.4f}")

for epoch in range(1, 201):
    model.train()
    optimizer.zero_grad()
    recovered, mu, logvar = model(features, adj_norm)
    loss = loss_function(recovered, adj_label, mu, logvar, N_NODES, norm, pos_weight)
    loss.backward()
    optimizer.step()
    if epoch % 20 == 0:
        model.eval()
        with torch.no_grad():
            _, mu, _ = model(features, adj_norm)
        print(f"epoch {epoch} train_loss {loss.item():.5f} "
              f"val_roc {get_roc_score(mu.numpy(), val_edges, val_false):.4f}")

model.eval()
with torch.no_grad():
    _, mu, _ = model(features, adj_norm)
print(f"test_roc {get_roc_score(mu.numpy(), test_edges, test_false):.4f}")
