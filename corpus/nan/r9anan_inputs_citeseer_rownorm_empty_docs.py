"""Graph attention network (GAT, Velickovic et al.) for semi-supervised node
classification on a CiteSeer-like citation graph: bag-of-words paper features,
citation edges, 6 topics, a handful of labelled papers per topic. Full-batch
training with accelerate.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed


def load_data(n_nodes=240, n_words=300, n_classes=6, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, size=n_nodes)
    topic_words = rng.random((n_classes, n_words)) < 0.04
    features = np.zeros((n_nodes, n_words), dtype=np.float32)
    for i in range(n_nodes):
        p = np.where(topic_words[labels[i]], 0.25, 0.01)
        features[i] = rng.random(n_words) < p
    # papers cited in the graph but absent from the content file: no words
    missing = rng.choice(n_nodes, size=8, replace=False)
    features[missing] = 0.0

    adj = np.zeros((n_nodes, n_nodes), dtype=np.float32)
    for i in range(n_nodes):
        same = np.flatnonzero(labels == labels[i])
        for j in rng.choice(same, size=3):
            adj[i, j] = adj[j, i] = 1.0
        j = rng.integers(0, n_nodes)
        adj[i, j] = adj[j, i] = 1.0

    features = features / features.sum(1, keepdims=True)

    idx_train = np.concatenate([np.flatnonzero(labels == c)[:20] for c in range(n_classes)])
    rest = np.setdiff1d(np.arange(n_nodes), idx_train)
    idx_val, idx_test = rest[:60], rest[60:]
    return features, adj, labels, idx_train, idx_val, idx_test


class GraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, dropout, alpha=0.2, concat=True):
        super().__init__()
        self.dropout = dropout
        self.concat = concat
        self.W = nn.Parameter(torch.empty(in_features, out_features))
        self.a = nn.Parameter(torch.empty(2 * out_features, 1))
        nn.init.xavier_uniform_(self.W, gain=1.414)
        nn.init.xavier_uniform_(self.a, gain=1.414)
        self.leakyrelu = nn.LeakyReLU(alpha)

    def forward(self, h, adj):
        Wh = h @ self.W
        n_out = Wh.size(1)
        e = self.leakyrelu(Wh @ self.a[:n_out] + (Wh @ self.a[n_out:]).T)
        attention = torch.where(adj > 0, e, torch.full_like(e, -9e15))
        attention = F.softmax(attention, dim=1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = attention @ Wh
        return F.elu(h_prime) if self.concat else h_prime


class GAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout=0.6, nheads=8):
        super().__init__()
        self.dropout = dropout
        self.attentions = nn.ModuleList([GraphAttentionLayer(nfeat, nhid, dropout) for _ in range(nheads)])
        self.out_att = GraphAttentionLayer(nhid * nheads, nclass, dropout, concat=False)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.out_att(x, adj), dim=1)


def accuracy(output, labels):
    return (output.argmax(1) == labels).float().mean().item()


def main():
    set_seed(72)
    accelerator = Accelerator(cpu=True)
    features, adj, labels, idx_train, idx_val, idx_test = load_data()
    features = torch.from_numpy(features)
    adj = torch.from_numpy(adj + np.eye(adj.shape[0], dtype=np.float32))
    labels = torch.from_numpy(labels).long()
    idx_train, idx_val, idx_test = map(torch.from_numpy, (idx_train, idx_val, idx_test))

    model = GAT(nfeat=features.shape[1], nhid=8, nclass=int(labels.max()) + 1, dropout=0.6, nheads=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    model, optimizer = accelerator.prepare(model, optimizer)
    features, adj, labels = features.to(accelerator.device), adj.to(accelerator.device), labels.to(accelerator.device)

    for epoch in range(80):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        accelerator.backward(loss_train)
        optimizer.step()

        model.eval()
        with torch.no_grad():
            output = model(features, adj)
            loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        if epoch % 10 == 0:
            accelerator.print(f"Epoch: {epoch + 1:04d} loss_train: {loss_train.item():.4f} "
                              f"acc_train: {accuracy(output[idx_train], labels[idx_train]):.4f} "
                              f"loss_val: {loss_val.item():.4f} acc_val: {accuracy(output[idx_val], labels[idx_val]):.4f}")

    model.eval()
    with torch.no_grad():
        output = model(features, adj)
    accelerator.print(f"Test set results: loss= {F.nll_loss(output[idx_test], labels[idx_test]).item():.4f} "
                      f"accuracy= {accuracy(output[idx_test], labels[idx_test]):.4f}")


if __name__ == "__main__":
    main()
