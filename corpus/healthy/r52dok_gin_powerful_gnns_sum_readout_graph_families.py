"""GIN graph classification (powerful-gnns style GraphCNN): sum neighbour pooling, MLP + BN per
layer, sum readout of every layer's hidden features into its own linear prediction head.
Synthetic task: tell Erdos-Renyi, Barabasi-Albert and Watts-Strogatz graphs apart."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)
MAX_DEG = 16


class S2VGraph(object):
    def __init__(self, n, edges, label):
        self.label = label
        self.n = n
        self.edges = edges
        self.neighbors = [[] for _ in range(n)]
        for i, j in edges:
            self.neighbors[i].append(j)
            self.neighbors[j].append(i)
        self.max_neighbor = max(len(nb) for nb in self.neighbors)
        degs = [min(len(nb), MAX_DEG - 1) for nb in self.neighbors]
        self.node_features = torch.zeros(n, MAX_DEG)
        self.node_features[range(n), degs] = 1
        self.edge_mat = torch.LongTensor(np.array(edges + [(j, i) for i, j in edges]).T)


def er_graph(rng, n, m):
    edges = set()
    while len(edges) < m:
        i, j = rng.integers(0, n, 2)
        if i != j:
            edges.add((min(i, j), max(i, j)))
    return list(edges)


def ba_graph(rng, n, k=2):
    edges, targets, repeated = [], list(range(k)), []
    for src in range(k, n):
        for t in set(targets):
            edges.append((int(t), src))
        repeated.extend(targets)
        repeated.extend([src] * k)
        targets = list(rng.choice(repeated, k, replace=False))
    return list({(min(i, j), max(i, j)) for i, j in edges})


def ws_graph(rng, n, k=4, p=0.15):
    edges = set()
    for i in range(n):
        for d in range(1, k // 2 + 1):
            j = (i + d) % n
            if rng.random() < p:
                j = int(rng.integers(0, n))
                while j == i:
                    j = int(rng.integers(0, n))
            edges.add((min(i, j), max(i, j)))
    return list(edges)


def load_data(num_graphs, seed):
    rng = np.random.default_rng(seed)
    graphs = []
    for g in range(num_graphs):
        label = g % 3
        n = int(rng.integers(12, 31))
        if label == 0:
            edges = er_graph(rng, n, 2 * n - 3)
        elif label == 1:
            edges = ba_graph(rng, n)
        else:
            edges = ws_graph(rng, n)
        graphs.append(S2VGraph(n, edges, label))
    return graphs


class MLP(nn.Module):
    def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.linear_or_not = True
        self.num_layers = num_layers
        if num_layers == 1:
            self.linear = nn.Linear(input_dim, output_dim)
        else:
            self.linear_or_not = False
            self.linears = torch.nn.ModuleList()
            self.batch_norms = torch.nn.ModuleList()
            self.linears.append(nn.Linear(input_dim, hidden_dim))
            for layer in range(num_layers - 2):
                self.linears.append(nn.Linear(hidden_dim, hidden_dim))
            self.linears.append(nn.Linear(hidden_dim, output_dim))
            for layer in range(num_layers - 1):
                self.batch_norms.append(nn.BatchNorm1d(hidden_dim))

    def forward(self, x):
        if self.linear_or_not:
            return self.linear(x)
        h = x
        for layer in range(self.num_layers - 1):
            h = F.relu(self.batch_norms[layer](self.linears[layer](h)))
        return self.linears[self.num_layers - 1](h)


class GraphCNN(nn.Module):
    def __init__(self, num_layers, num_mlp_layers, input_dim, hidden_dim, output_dim,
                 final_dropout, learn_eps, graph_pooling_type, neighbor_pooling_type):
        super().__init__()
        self.final_dropout = final_dropout
        self.num_layers = num_layers
        self.graph_pooling_type = graph_pooling_type
        self.neighbor_pooling_type = neighbor_pooling_type
        self.learn_eps = learn_eps
        self.eps = nn.Parameter(torch.zeros(self.num_layers - 1))
        self.mlps = torch.nn.ModuleList()
        self.batch_norms = torch.nn.ModuleList()
        for layer in range(self.num_layers - 1):
            if layer == 0:
                self.mlps.append(MLP(num_mlp_layers, input_dim, hidden_dim, hidden_dim))
            else:
                self.mlps.append(MLP(num_mlp_layers, hidden_dim, hidden_dim, hidden_dim))
            self.batch_norms.append(nn.BatchNorm1d(hidden_dim))
        self.linears_prediction = torch.nn.ModuleList()
        for layer in range(num_layers):
            if layer == 0:
                self.linears_prediction.append(nn.Linear(input_dim, output_dim))
            else:
                self.linears_prediction.append(nn.Linear(hidden_dim, output_dim))

    def __preprocess_graphpool(self, batch_graph):
        start_idx = [0]
        for graph in batch_graph:
            start_idx.append(start_idx[-1] + graph.n)
        idx, elem = [], []
        for i, graph in enumerate(batch_graph):
            if self.graph_pooling_type == "average":
                elem.extend([1. / graph.n] * graph.n)
            else:
                elem.extend([1] * graph.n)
            idx.extend([[i, j] for j in range(start_idx[i], start_idx[i + 1])])
        elem = torch.FloatTensor(elem)
        idx = torch.LongTensor(idx).transpose(0, 1)
        return torch.sparse_coo_tensor(idx, elem, torch.Size([len(batch_graph), start_idx[-1]]))

    def __preprocess_neighbors_sumavepool(self, batch_graph):
        edge_mat_list = []
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + graph.n)
            edge_mat_list.append(graph.edge_mat + start_idx[i])
        Adj_block_idx = torch.cat(edge_mat_list, 1)
        Adj_block_elem = torch.ones(Adj_block_idx.shape[1])
        if not self.learn_eps:
            num_node = start_idx[-1]
            self_loop_edge = torch.LongTensor([range(num_node), range(num_node)])
            elem = torch.ones(num_node)
            Adj_block_idx = torch.cat([Adj_block_idx, self_loop_edge], 1)
            Adj_block_elem = torch.cat([Adj_block_elem, elem], 0)
        return torch.sparse_coo_tensor(Adj_block_idx, Adj_block_elem,
                                       torch.Size([start_idx[-1], start_idx[-1]]))

    def next_layer_eps(self, h, layer, Adj_block=None):
        pooled = torch.spmm(Adj_block, h)
        pooled = pooled + (1 + self.eps[layer]) * h
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        return F.relu(h)

    def next_layer(self, h, layer, Adj_block=None):
        pooled = torch.spmm(Adj_block, h)
        if self.neighbor_pooling_type == "average":
            degree = torch.spmm(Adj_block, torch.ones((Adj_block.shape[0], 1)))
            pooled = pooled / degree
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        return F.relu(h)

    def forward(self, batch_graph):
        X_concat = torch.cat([graph.node_features for graph in batch_graph], 0)
        graph_pool = self.__preprocess_graphpool(batch_graph)
        Adj_block = self.__preprocess_neighbors_sumavepool(batch_graph)
        hidden_rep = [X_concat]
        h = X_concat
        for layer in range(self.num_layers - 1):
            if self.learn_eps:
                h = self.next_layer_eps(h, layer, Adj_block=Adj_block)
            else:
                h = self.next_layer(h, layer, Adj_block=Adj_block)
            hidden_rep.append(h)
        score_over_layer = 0
        for layer, h in enumerate(hidden_rep):
            pooled_h = torch.spmm(graph_pool, h)
            score_over_layer += F.dropout(self.linears_prediction[layer](pooled_h),
                                          self.final_dropout, training=self.training)
        return score_over_layer


def train(args, model, train_graphs, optimizer, epoch):
    model.train()
    loss_accum = 0
    for pos in range(args["iters_per_epoch"]):
        selected_idx = np.random.permutation(len(train_graphs))[:args["batch_size"]]
        batch_graph = [train_graphs[idx] for idx in selected_idx]
        output = model(batch_graph)
        labels = torch.LongTensor([graph.label for graph in batch_graph])
        loss = criterion(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_accum += loss.detach().cpu().numpy()
    average_loss = loss_accum / args["iters_per_epoch"]
    print("loss training: %f" % (average_loss))
    return average_loss


def pass_data_iteratively(model, graphs, minibatch_size=64):
    model.eval()
    output = []
    idx = np.arange(len(graphs))
    for i in range(0, len(graphs), minibatch_size):
        sampled_idx = idx[i:i + minibatch_size]
        if len(sampled_idx) == 0:
            continue
        output.append(model([graphs[j] for j in sampled_idx]).detach())
    return torch.cat(output, 0)


def test(model, train_graphs, test_graphs):
    with torch.no_grad():
        output = pass_data_iteratively(model, train_graphs)
        pred = output.max(1, keepdim=True)[1]
        labels = torch.LongTensor([graph.label for graph in train_graphs])
        acc_train = pred.eq(labels.view_as(pred)).sum().item() / float(len(train_graphs))
        output = pass_data_iteratively(model, test_graphs)
        pred = output.max(1, keepdim=True)[1]
        labels = torch.LongTensor([graph.label for graph in test_graphs])
        acc_test = pred.eq(labels.view_as(pred)).sum().item() / float(len(test_graphs))
    print("accuracy train: %f test: %f" % (acc_train, acc_test))
    return acc_train, acc_test


args = {"batch_size": 32, "iters_per_epoch": 40, "epochs": 5, "lr": 0.01, "num_layers": 5,
        "num_mlp_layers": 2, "hidden_dim": 32, "final_dropout": 0.5}
criterion = nn.CrossEntropyLoss()
train_graphs = load_data(300, seed=1)
test_graphs = load_data(90, seed=2)
num_classes = 3

model = GraphCNN(args["num_layers"], args["num_mlp_layers"], train_graphs[0].node_features.shape[1],
                 args["hidden_dim"], num_classes, args["final_dropout"], False, "sum", "sum")
optimizer = optim.Adam(model.parameters(), lr=args["lr"])
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)

test(model, train_graphs, test_graphs)
for epoch in range(1, args["epochs"] + 1):
    print("epoch", epoch)
    avg_loss = train(args, model, train_graphs, optimizer, epoch)
    scheduler.step()
    acc_train, acc_test = test(model, train_graphs, test_graphs)
