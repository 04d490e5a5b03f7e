"""Two-layer GCN for node classification on a custom graph (442 nodes, community labels),
full-batch training with train/test masks, GCN layers written out with a normalized adjacency."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

num_nodes = 442
num_node_features = 32
num_communities = 6

# ---- build a custom graph: stochastic block model with node features ----
y = torch.arange(num_nodes) % num_communities
y = y[torch.randperm(num_nodes)]
same = (y[:, None] == y[None, :]).float()
prob = 0.06 * same + 0.004 * (1 - same)
upper = torch.triu((torch.rand(num_nodes, num_nodes) < prob).float(), diagonal=1)
adj = upper + upper.t()
edge_index = adj.nonzero().t().contiguous()

centers = torch.randn(num_communities, num_node_features)
x = 0.6 * centers[y] + torch.randn(num_nodes, num_node_features)

perm = torch.randperm(num_nodes)
train_mask = torch.zeros(num_nodes, dtype=torch.bool)
test_mask = torch.zeros(num_nodes, dtype=torch.bool)
train_mask[perm[:300]] = True
test_mask[perm[300:]] = True


class Data:
    def __init__(self, x, edge_index, train_mask, test_mask, y):
        self.x, self.edge_index, self.y = x, edge_index, y
        self.train_mask, self.test_mask = train_mask, test_mask
        self.num_nodes = x.size(0)
        self.num_node_features = x.size(1)


class GCNConv(nn.Module):
    """x' = D^-1/2 (A + I) D^-1/2 x W + b"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.xavier_uniform_(self.lin.weight)

    def forward(self, x, edge_index):
        n = x.size(0)
        a = torch.zeros(n, n)
        a[edge_index[0], edge_index[1]] = 1.0
        a = a + torch.eye(n)
        deg_inv_sqrt = a.sum(1).pow(-0.5)
        a_norm = deg_inv_sqrt[:, None] * a * deg_inv_sqrt[None, :]
        return a_norm @ self.lin(x) + self.bias


dataset = Data(x=x, edge_index=edge_index, train_mask=train_mask, test_mask=test_mask, y=y)
print(f'nodes: {dataset.num_nodes}, edges: {edge_index.size(1) // 2}, features: {dataset.num_node_features}, '
      f'train: {int(train_mask.sum())}, test: {int(test_mask.sum())}')


class Net(torch.nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = GCNConv(dataset.num_node_features, 16)
        self.conv2 = GCNConv(16, 2)

    def forward(self, data):
        x, edge_index = data.x, data.edge_index

        x = self.conv1(x, edge_index)
        x = F.relu(x)
        x = F.dropout(x, training=self.training)
        x = self.conv2(x, edge_index)

        return F.log_softmax(x, dim=1)


device = torch.device('cpu')
model = Net().to(device)
data = dataset
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

for epoch in range(200):
    model.train()
    optimizer.zero_grad()
    out = model(data)
    loss = F.nll_loss(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    if epoch % 20 == 0 or epoch == 199:
        model.eval()
        with torch.no_grad():
            pred = model(data).max(dim=1)[1]
        train_acc = pred[data.train_mask].eq(data.y[data.train_mask]).sum().item() / int(data.train_mask.sum())
        test_acc = pred[data.test_mask].eq(data.y[data.test_mask]).sum().item() / int(data.test_mask.sum())
        print(f'Epoch: {epoch:03d}, Loss: {loss.item():.4f}, Train Acc: {train_acc:.4f}, Test Acc: {test_acc:.4f}')
