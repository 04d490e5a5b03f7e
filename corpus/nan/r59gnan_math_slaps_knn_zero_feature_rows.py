"""SLAPS (self-supervised graph structure learning) on a Citeseer-like citation data set,
end-to-end mode with the MLP-D graph generator and the sparse kNN graph (-sparse 1).

GCN_DAE learns the adjacency from the node features by denoising masked bag-of-words
features; GCN_C classifies the papers on the learned graph.  The citation data is a synthetic
stand-in for Citeseer (binary bag-of-words features, 6 classes, Planetoid-style splits)."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

EOS = 1e-10


def load_citeseer_like(n_nodes=800, n_feats=300, n_classes=6, n_missing=12, seed=0):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, n_classes, n_nodes)
    topic_words = rng.rand(n_classes, n_feats) < 0.05
    features = np.zeros((n_nodes, n_feats), dtype=np.float32)
    for i in range(n_nodes):
        own = topic_words[labels[i]] & (rng.rand(n_feats) < 0.15)
        noise = rng.rand(n_feats) < 0.02
        features[i] = (own | noise).astype(np.float32)
    # Planetoid citeseer: the test indices have gaps, the loader fills those rows with zero vectors
    test_idx_range = np.arange(n_nodes - 200, n_nodes)
    missing = rng.choice(test_idx_range, n_missing, replace=False)
    features[missing] = 0.0
    train_mask = np.zeros(n_nodes, dtype=bool)
    for c in range(n_classes):
        train_mask[np.where(labels[:n_nodes - 200] == c)[0][:20]] = True
    val_mask = np.zeros(n_nodes, dtype=bool)
    val_mask[np.setdiff1d(np.arange(0, n_nodes - 200), np.where(train_mask)[0])[:200]] = True
    test_mask = np.zeros(n_nodes, dtype=bool)
    test_mask[test_idx_range] = True
    return (torch.from_numpy(features), n_feats, torch.from_numpy(labels).long(), n_classes,
            torch.from_numpy(train_mask), torch.from_numpy(val_mask), torch.from_numpy(test_mask))


def get_random_mask(features, r, nr):
    nones = torch.sum(features > 0.0).float()
    nzeros = features.shape[0] * features.shape[1] - nones
    pzeros = nones / nzeros / r * nr
    probs = torch.zeros(features.shape)
    probs[features == 0.0] = pzeros
    probs[features > 0.0] = 1 / r
    mask = torch.bernoulli(probs)
    return mask


def accuracy(preds, labels):
    pred_class = torch.max(preds, 1)[1]
    return torch.sum(torch.eq(pred_class, labels)).float() / labels.shape[0]


def apply_non_linearity(tensor, non_linearity, i):
    if non_linearity == 'elu':
        return F.elu(tensor * i - i) + 1
    elif non_linearity == 'relu':
        return F.relu(tensor)
    return tensor


def knn_fast(X, k, b):
    X = F.normalize(X, dim=1, p=2)
    index = 0
    values = torch.zeros(X.shape[0] * (k + 1))
    rows = torch.zeros(X.shape[0] * (k + 1))
    cols = torch.zeros(X.shape[0] * (k + 1))
    norm_row = torch.zeros(X.shape[0])
    norm_col = torch.zeros(X.shape[0])
    while index < X.shape[0]:
        if (index + b) > (X.shape[0]):
            end = X.shape[0]
        else:
            end = index + b
        sub_tensor = X[index:index + b]
        similarities = torch.mm(sub_tensor, X.t())
        vals, inds = similarities.topk(k=k + 1, dim=-1)
        values[index * (k + 1):(end) * (k + 1)] = vals.view(-1)
        cols[index * (k + 1):(end) * (k + 1)] = inds.view(-1)
        rows[index * (k + 1):(end) * (k + 1)] = torch.arange(index, end).view(-1, 1).repeat(1, k + 1).view(-1)
        norm_row[index: end] = torch.sum(vals, dim=1)
        norm_col.index_add_(-1, inds.view(-1), vals.view(-1))
        index += b
    norm = norm_row + norm_col
    rows = rows.long()
    cols = cols.long()
    values *= (torch.pow(norm[rows], -0.5) * torch.pow(norm[cols], -0.5))
    return rows, cols, values


class Graph:
    """edge list with weights (stands in for the dgl graph of the original code)"""
    def __init__(self, src, dst, w, num_nodes):
        self.src, self.dst, self.w, self.num_nodes = src, dst, w, num_nodes


class Diag(nn.Module):
    def __init__(self, input_size):
        super(Diag, self).__init__()
        self.W = nn.Parameter(torch.ones(input_size))
        self.input_size = input_size

    def forward(self, input):
        hidden = input @ torch.diag(self.W)
        return hidden


class GCNConv_sparse(nn.Module):
    def __init__(self, input_size, output_size):
        super(GCNConv_sparse, self).__init__()
        self.linear = nn.Linear(input_size, output_size)

    def forward(self, x, g):
        h = self.linear(x)
        A = torch.sparse_coo_tensor(torch.stack([g.dst, g.src]), g.w, (g.num_nodes, g.num_nodes),
                                    check_invariants=False)
        return torch.sparse.mm(A, h)


class MLP_Diag(nn.Module):
    def __init__(self, nlayers, isize, k, non_linearity, i, mlp_act):
        super(MLP_Diag, self).__init__()
        self.i = i
        self.layers = nn.ModuleList()
        for _ in range(nlayers):
            self.layers.append(Diag(isize))
        self.k = k
        self.non_linearity = non_linearity
        self.mlp_act = mlp_act

    def internal_forward(self, h):
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i != (len(self.layers) - 1):
                if self.mlp_act == "relu":
                    h = F.relu(h)
                elif self.mlp_act == "tanh":
                    h = torch.tanh(h)
        return h

    def forward(self, features):
        embeddings = self.internal_forward(features)
        rows, cols, values = knn_fast(embeddings, self.k, 1000)
        rows_ = torch.cat((rows, cols))
        cols_ = torch.cat((cols, rows))
        values_ = torch.cat((values, values))
        values_ = apply_non_linearity(values_, self.non_linearity, self.i)
        return Graph(rows_, cols_, values_, features.shape[0])


class GCN_DAE(nn.Module):
    def __init__(self, nlayers, in_dim, hidden_dim, nclasses, dropout, dropout_adj, k, i_, non_linearity, mlp_act):
        super(GCN_DAE, self).__init__()
        self.layers = nn.ModuleList()
        self.layers.append(GCNConv_sparse(in_dim, hidden_dim))
        for _ in range(nlayers - 2):
            self.layers.append(GCNConv_sparse(hidden_dim, hidden_dim))
        self.layers.append(GCNConv_sparse(hidden_dim, nclasses))
        self.dropout = dropout
        self.dropout_adj_p = dropout_adj
        self.graph_gen = MLP_Diag(2, in_dim, k, non_linearity, i_, mlp_act)

    def get_adj(self, h):
        return self.graph_gen(h)

    def forward(self, features, x):
        Adj_ = self.get_adj(features)
        Adj = Graph(Adj_.src, Adj_.dst, F.dropout(Adj_.w, p=self.dropout_adj_p, training=self.training),
                    Adj_.num_nodes)
        for i, conv in enumerate(self.layers[:-1]):
            x = conv(x, Adj)
            x = F.relu(x)
            x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.layers[-1](x, Adj)
        return x, Adj_


class GCN_C(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout, dropout_adj):
        super(GCN_C, self).__init__()
        self.layers = nn.ModuleList()
        self.layers.append(GCNConv_sparse(in_channels, hidden_channels))
        for _ in range(num_layers - 2):
            self.layers.append(GCNConv_sparse(hidden_channels, hidden_channels))
        self.layers.append(GCNConv_sparse(hidden_channels, out_channels))
        self.dropout = dropout
        self.dropout_adj_p = dropout_adj

    def forward(self, x, adj_t):
        Adj = Graph(adj_t.src, adj_t.dst, F.dropout(adj_t.w, p=self.dropout_adj_p, training=self.training),
                    adj_t.num_nodes)
        for i, conv in enumerate(self.layers[:-1]):
            x = conv(x, Adj)
            x = F.relu(x)
            x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.layers[-1](x, Adj)
        return x


class Experiment:
    def get_loss_learnable_adj(self, model, mask, features, labels, Adj):
        logits = model(features, Adj)
        logp = F.log_softmax(logits, 1)
        loss = F.nll_loss(logp[mask], labels[mask], reduction='mean')
        accu = accuracy(logp[mask], labels[mask])
        return loss, accu

    def get_loss_masked_features(self, model, features, mask):
        masked_features = features * (1 - mask)
        logits, Adj = model(features, masked_features)
        indices = mask > 0
        loss = F.binary_cross_entropy_with_logits(logits[indices], features[indices], reduction='mean')
        return loss, Adj

    def train_end_to_end(self, args):
        features, nfeats, labels, nclasses, train_mask, val_mask, test_mask = load_citeseer_like()
        print("nodes %d  features %d  classes %d  train %d  val %d  test %d" % (
            features.shape[0], nfeats, nclasses, train_mask.sum(), val_mask.sum(), test_mask.sum()))

        model1 = GCN_DAE(nlayers=args.nlayers_adj, in_dim=nfeats, hidden_dim=args.hidden_adj, nclasses=nfeats,
                         dropout=args.dropout1, dropout_adj=args.dropout_adj1, k=args.k, i_=args.i,
                         non_linearity=args.non_linearity, mlp_act=args.mlp_act)
        model2 = GCN_C(in_channels=nfeats, hidden_channels=args.hidden, out_channels=nclasses,
                       num_layers=args.nlayers, dropout=args.dropout2, dropout_adj=args.dropout_adj2)

        optimizer1 = torch.optim.Adam(model1.parameters(), lr=args.lr_adj, weight_decay=args.w_decay_adj)
        optimizer2 = torch.optim.Adam(model2.parameters(), lr=args.lr, weight_decay=args.w_decay)

        best_val_accu = 0.0
        test_accu_ = torch.tensor(0.0)
        for epoch in range(1, args.epochs_adj + 1):
            model1.train()
            model2.train()
            optimizer1.zero_grad()
            optimizer2.zero_grad()

            mask = get_random_mask(features, args.ratio, args.nr)

            if epoch < args.epochs_adj // args.epoch_d:
                model2.eval()
                loss1, Adj = self.get_loss_masked_features(model1, features, mask)
                loss2 = torch.tensor(0.0)
            else:
                loss1, Adj = self.get_loss_masked_features(model1, features, mask)
                loss2, accu = self.get_loss_learnable_adj(model2, train_mask, features, labels, Adj)

            loss = loss1 * args.lambda_ + loss2
            loss.backward()
            optimizer1.step()
            optimizer2.step()

            if epoch == 1 or epoch % 10 == 0:
                print("Epoch {:05d} | Train Loss {:.4f}, {:.4f}".format(epoch, loss1.item() * args.lambda_,
                                                                        loss2.item()))

            if epoch >= args.epochs_adj // args.epoch_d and epoch % 5 == 0:
                with torch.no_grad():
                    model1.eval()
                    model2.eval()
                    val_loss, val_accu = self.get_loss_learnable_adj(model2, val_mask, features, labels, Adj)
                    test_loss_, test_accu_now = self.get_loss_learnable_adj(model2, test_mask, features, labels, Adj)
                    print("          val loss {:.4f} acc {:.4f} | test acc {:.4f}".format(
                        val_loss, val_accu, test_accu_now))
                    if val_accu > best_val_accu:
                        best_val_accu = val_accu
                        test_accu_ = test_accu_now

        print("best val accuracy {:.4f}, test accuracy {:.4f}".format(float(best_val_accu), float(test_accu_)))


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('-epochs_adj', type=int, default=60)
    parser.add_argument('-lr', type=float, default=0.01)
    parser.add_argument('-lr_adj', type=float, default=0.01)
    parser.add_argument('-w_decay', type=float, default=0.0005)
    parser.add_argument('-w_decay_adj', type=float, default=0.0)
    parser.add_argument('-hidden', type=int, default=32)
    parser.add_argument('-hidden_adj', type=int, default=128)
    parser.add_argument('-dropout1', type=float, default=0.5)
    parser.add_argument('-dropout2', type=float, default=0.5)
    parser.add_argument('-dropout_adj1', type=float, default=0.25)
    parser.add_argument('-dropout_adj2', type=float, default=0.5)
    parser.add_argument('-nlayers', type=int, default=2)
    parser.add_argument('-nlayers_adj', type=int, default=2)
    parser.add_argument('-k', type=int, default=10)
    parser.add_argument('-i', type=int, default=6)
    parser.add_argument('-lambda_', type=float, default=10.0)
    parser.add_argument('-nr', type=int, default=5)
    parser.add_argument('-ratio', type=int, default=10)
    parser.add_argument('-non_linearity', type=str, default='relu')
    parser.add_argument('-mlp_act', type=str, default='tanh')
    parser.add_argument('-epoch_d', type=int, default=5)
    args = parser.parse_args()

    Experiment().train_end_to_end(args)
