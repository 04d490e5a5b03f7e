"""Semi-supervised node classification with a two-layer GCN (Kipf & Welling), pygcn style,
on a synthetic citation-like graph (planted communities, sparse bag-of-words features)."""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter

np.random.seed(42)
torch.manual_seed(42)

EPOCHS = 200
LR = 0.01
WEIGHT_DECAY = 5e-4
HIDDEN = 16
DROPOUT = 0.5


def encode_onehot(labels):
    classes = sorted(set(labels))
    classes_dict = {c: np.identity(len(classes))[i, :] for i, c in enumerate(classes)}
    return np.array(list(map(classes_dict.get, labels)), dtype=np.int32)


def normalize(mx):
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    return np.diag(r_inv).dot(mx)


def sparse_mx_to_torch_sparse_tensor(mx):
    rows, cols = np.nonzero(mx)
    indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = torch.from_numpy(mx[rows, cols].astype(np.float32))
    return torch.sparse_coo_tensor(indices, values, torch.Size(mx.shape))


def make_citation_graph(n_nodes=700, n_classes=7, n_words=300, p_in=0.02, p_out=0.002):
    labels = np.random.randint(0, n_classes, size=n_nodes)
    same = labels[:, None] == labels[None, :]
    probs = np.where(same, p_in, p_out)
    upper = np.triu(np.random.rand(n_nodes, n_nodes) < probs, k=1).astype(np.float32)
    adj = upper + upper.T
    topic_words = np.random.rand(n_classes, n_words) < 0.08
    word_p = np.where(topic_words[labels], 0.12, 0.02)
    features = (np.random.rand(n_nodes, n_words) < word_p).astype(np.float32)
    return adj, features, labels


def load_data():
    print('Loading synthetic citation dataset...')
    adj, features, raw_labels = make_citation_graph()
    labels = encode_onehot(list(raw_labels))
    features = normalize(features)
    adj = normalize(adj + np.eye(adj.shape[0], dtype=np.float32))

    idx_train = range(140)
    idx_val = range(200, 400)
    idx_test = range(400, 700)

    features = torch.FloatTensor(features)
    labels = torch.LongTensor(np.where(labels)[1])
    adj = sparse_mx_to_torch_sparse_tensor(adj)

    idx_train = torch.LongTensor(idx_train)
    idx_val = torch.LongTensor(idx_val)
    idx_test = torch.LongTensor(idx_test)
    return adj, features, labels, idx_train, idx_val, idx_test


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


adj, features, labels, idx_train, idx_val, idx_test = load_data()

model = GCN(nfeat=features.shape[1], nhid=HIDDEN, nclass=labels.max().item() + 1, dropout=DROPOUT)
optimizer = optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


def train(epoch):
    t = time.time()
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    acc_train = accuracy(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()

    model.eval()
    output = model(features, adj)
    loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    acc_val = accuracy(output[idx_val], labels[idx_val])
    if epoch % 20 == 0 or epoch == EPOCHS - 1:
        print('Epoch: {:04d}'.format(epoch + 1),
              'loss_train: {:.4f}'.format(loss_train.item()),
              'acc_train: {:.4f}'.format(acc_train.item()),
              'loss_val: {:.4f}'.format(loss_val.item()),
              'acc_val: {:.4f}'.format(acc_val.item()),
              'time: {:.4f}s'.format(time.time() - t))


def test():
    model.eval()
    output = model(features, adj)
    loss_test = F.nll_loss(output[idx_test], labels[idx_test])
    acc_test = accuracy(output[idx_test], labels[idx_test])
    print("Test set results:",
          "loss= {:.4f}".format(loss_test.item()),
          "accuracy= {:.4f}".format(acc_test.item()))


t_total = time.time()
for epoch in range(EPOCHS):
    train(epoch)
print("Optimization Finished!")
print("Total time elapsed: {:.4f}s".format(time.time() - t_total))
test()
