"""DeeperGCN (res+ blocks of GENConv with softmax aggregation) for node classification on a
product co-purchasing graph, following deep_gcns_torch's examples/ogb/ogbn_products/main.py:
training on the subgraphs of a random node partition (cluster_number parts per epoch) and a
full-batch test on CPU at the last epoch.

The OGB graph cannot be downloaded here; a synthetic co-purchasing graph stands in for it
(100-dim node features, 47 product categories, edges mostly inside a category).
"""
import argparse
import logging
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
torch.manual_seed(0)
np.random.seed(0)


def make_products_graph(num_nodes=40000, avg_degree=24, num_classes=47, in_channels=100):
    y = torch.randint(0, num_classes, (num_nodes,))
    order = torch.argsort(y)
    counts = torch.bincount(y, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts
    num_edges = num_nodes * avg_degree // 2
    src = torch.randint(0, num_nodes, (num_edges,))
    same = torch.rand(num_edges) < 0.7
    ys = y[src]
    dst_same = order[starts[ys] + (torch.rand(num_edges) * counts[ys]).long()]
    dst_rand = torch.randint(0, num_nodes, (num_edges,))
    dst = torch.where(same, dst_same, dst_rand)
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    centroids = torch.randn(num_classes, in_channels)
    x = 0.25 * centroids[y] + torch.randn(num_nodes, in_channels)
    perm = torch.randperm(num_nodes)
    split_idx = {"train": perm[: num_nodes // 10], "valid": perm[num_nodes // 10: num_nodes // 5],
                 "test": perm[num_nodes // 5:]}
    return x, y.unsqueeze(1), edge_index, split_idx


def add_self_loops(edge_index, num_nodes):
    loops = torch.arange(num_nodes).repeat(2, 1)
    return torch.cat([edge_index, loops], dim=1)


def random_partition_graph(num_nodes, cluster_number=10):
    return np.random.randint(cluster_number, size=num_nodes)


def generate_sub_graphs(edge_index, parts, cluster_number=10):
    parts = torch.as_tensor(parts)
    sg_nodes, sg_edges = [], []
    for cluster in range(cluster_number):
        nodes = torch.nonzero(parts == cluster).squeeze(1)
        mapper = torch.full((len(parts),), -1, dtype=torch.long)
        mapper[nodes] = torch.arange(len(nodes))
        keep = (parts[edge_index[0]] == cluster) & (parts[edge_index[1]] == cluster)
        sg_nodes.append(nodes.tolist())
        sg_edges.append(mapper[edge_index[:, keep]])
    return sg_nodes, sg_edges


class GENConv(torch.nn.Module):
    """GENeralized graph convolution with softmax aggregation (learnable temperature t)."""

    def __init__(self, in_dim, out_dim, t=1.0, learn_t=True, eps=1e-7):
        super().__init__()
        self.t = torch.nn.Parameter(torch.tensor([t]), requires_grad=learn_t)
        self.eps = eps
        self.mlp = torch.nn.Linear(in_dim, out_dim)

    def forward(self, x, edge_index):
        src, dst = edge_index
        msg = F.relu(x[src]) + self.eps
        scores = msg * self.t
        max_per_dst = torch.full_like(x, -1e9).scatter_reduce(0, dst.unsqueeze(1).expand_as(scores), scores,
                                                              reduce="amax", include_self=True)
        weights = torch.exp(scores - max_per_dst[dst])
        denom = torch.zeros_like(x).index_add_(0, dst, weights)
        alpha = weights / (denom[dst] + 1e-16)
        out = torch.zeros_like(x).index_add_(0, dst, msg * alpha)
        return self.mlp(out + x)


class DeeperGCN(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        self.num_layers = args.num_layers
        self.dropout = args.dropout
        hidden_channels = args.hidden_channels
        self.node_features_encoder = torch.nn.Linear(args.in_channels, hidden_channels)
        self.node_pred_linear = torch.nn.Linear(hidden_channels, args.num_tasks)
        self.gcns = torch.nn.ModuleList([GENConv(hidden_channels, hidden_channels, t=args.t)
                                         for _ in range(self.num_layers)])
        self.norms = torch.nn.ModuleList([torch.nn.BatchNorm1d(hidden_channels) for _ in range(self.num_layers)])

    def forward(self, x, edge_index):
        h = self.node_features_encoder(x)
        h = self.gcns[0](h, edge_index)
        for layer in range(1, self.num_layers):
            h1 = self.norms[layer - 1](h)
            h2 = F.relu(h1)
            h2 = F.dropout(h2, p=self.dropout, training=self.training)
            h = self.gcns[layer](h2, edge_index) + h
        h = F.relu(self.norms[self.num_layers - 1](h))
        h = F.dropout(h, p=self.dropout, training=self.training)
        h = self.node_pred_linear(h)
        return torch.log_softmax(h, dim=-1)


def accuracy(y_true, y_pred):
    return (y_true == y_pred).float().mean().item()


@torch.no_grad()
def test(model, x, edge_index, y_true, split_idx):
    # test on CPU
    model.eval()
    model.to('cpu')
    out = model(x, edge_index)
    y_pred = out.argmax(dim=-1, keepdim=True)
    return tuple(accuracy(y_true[split_idx[s]], y_pred[split_idx[s]]) for s in ("train", "valid", "test"))


def train(data, model, x, y_true, train_idx, optimizer):
    loss_list = []
    model.train()
    sg_nodes, sg_edges = data
    train_mask = torch.zeros(len(y_true), dtype=torch.bool)
    train_mask[train_idx] = True
    idx_clusters = np.arange(len(sg_nodes))
    np.random.shuffle(idx_clusters)
    for idx in idx_clusters:
        nodes = torch.tensor(sg_nodes[idx])
        x_ = x[nodes]
        training_idx = torch.nonzero(train_mask[nodes]).squeeze(1)
        optimizer.zero_grad()
        pred = model(x_, sg_edges[idx])
        target = y_true[nodes[training_idx]].squeeze(1)
        loss = F.nll_loss(pred[training_idx], target)
        loss.backward()
        optimizer.step()
        loss_list.append(loss.item())
    return statistics.mean(loss_list)


def main():
    parser = argparse.ArgumentParser(description="DeeperGCN on a products graph")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--cluster_number", type=int, default=10)
    parser.add_argument("--num_layers", type=int, default=5)
    parser.add_argument("--hidden_channels", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--t", type=float, default=1.0)
    args = parser.parse_args()

    x, y, edge_index, split_idx = make_products_graph()
    edge_index = add_self_loops(edge_index, num_nodes=x.size(0))
    train_idx = split_idx["train"]
    args.in_channels = x.size(-1)
    args.num_tasks = int(y.max()) + 1
    logging.info("nodes %d, edges %d, classes %d", x.size(0), edge_index.size(1), args.num_tasks)

    model = DeeperGCN(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start_time = time.time()
    for epoch in range(1, args.epochs + 1):
        parts = random_partition_graph(x.size(0), cluster_number=args.cluster_number)
        data = generate_sub_graphs(edge_index, parts, cluster_number=args.cluster_number)
        epoch_loss = train(data, model, x, y, train_idx, optimizer)
        logging.info('Epoch {}, training loss {:.4f}'.format(epoch, epoch_loss))
        if epoch == args.epochs:
            result = test(model, x, edge_index, y, split_idx)
            logging.info("train acc %.4f, valid acc %.4f, test acc %.4f", *result)
    logging.info('Total time: %.1fs', time.time() - start_time)


if __name__ == "__main__":
    main()
