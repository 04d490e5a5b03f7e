"""LambdaRank on synthetic query/document features (MSLR-style), NDCG@10 on validation queries."""
import math
import torch
import torch.nn as nn

torch.manual_seed(0)

NUM_FEATURES = 24
DOCS_PER_QUERY = 30


def make_queries(n_queries, w1, w2, gen):
    data = []
    for _ in range(n_queries):
        X = torch.randn(DOCS_PER_QUERY, NUM_FEATURES, generator=gen)
        s = X @ w1 + 0.5 * torch.tanh(X @ w2) + 0.3 * torch.randn(DOCS_PER_QUERY, generator=gen)
        qs = torch.quantile(s, torch.tensor([0.5, 0.75, 0.9, 0.97]))
        Y = torch.bucketize(s, qs).float()
        data.append((X, Y))
    return data


gen = torch.Generator().manual_seed(1)
w1 = torch.randn(NUM_FEATURES, generator=gen) / math.sqrt(NUM_FEATURES)
w2 = torch.randn(NUM_FEATURES, generator=gen) / math.sqrt(NUM_FEATURES)
train_queries = make_queries(300, w1, w2, gen)
vali_queries = make_queries(60, w1, w2, gen)


class LambdaRank(nn.Module):
    def __init__(self, sigma):
        super(LambdaRank, self).__init__()
        self.fc1 = nn.Linear(NUM_FEATURES, 16)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(16, 1)
        self.sigma = sigma
        self.activation = nn.Sigmoid()

    def forward(self, x):
        input1 = self.act1(self.fc1(x))
        return self.activation(self.fc2(input1)) * self.sigma


def dcg_at_k(rels, k):
    rels = rels[:k]
    discounts = 1.0 / torch.log2(torch.arange(2, rels.numel() + 2, dtype=torch.float32))
    return ((2.0 ** rels - 1.0) * discounts).sum()


def max_dcg(Y):
    return dcg_at_k(torch.sort(Y, descending=True).values, Y.numel())


@torch.no_grad()
def eval_ndcg_at_k(net, queries, k=10):
    net.eval()
    scores = []
    for X, Y in queries:
        y_pred = net(X).view(-1)
        order = torch.argsort(y_pred, descending=True)
        ideal = dcg_at_k(torch.sort(Y, descending=True).values, k)
        scores.append((dcg_at_k(Y[order], k) / ideal).item())
    net.train()
    return sum(scores) / len(scores)


def train(epoch=8, batch_size=20, lr=0.001, sigma=1.0):
    precision = torch.float32
    net = LambdaRank(sigma)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    print("epoch 0 vali ndcg@10 {:.4f}".format(eval_ndcg_at_k(net, vali_queries)))

    step = 0
    for i in range(epoch):
        net.train()
        net.zero_grad()
        count = 0
        grad_batch, y_pred_batch = [], []
        perm = torch.randperm(len(train_queries))
        for qi in perm.tolist():
            X, Y = train_queries[qi]
            if Y.sum() == 0:
                continue

            denom = 1.0 / max_dcg(Y)
            y_pred = net(X)
            y_pred_batch.append(y_pred)
            score_diff = 1.0 + torch.exp(sigma * (y_pred - y_pred.t()))
            rank_order = torch.empty(DOCS_PER_QUERY)
            rank_order[torch.argsort(y_pred.view(-1), descending=True)] = torch.arange(1, DOCS_PER_QUERY + 1, dtype=precision)

            with torch.no_grad():
                y_tensor = Y.view(-1, 1)
                rel_diff = y_tensor - y_tensor.t()
                pos_pairs = (rel_diff > 0).type(precision)
                neg_pairs = (rel_diff < 0).type(precision)
                Sij = pos_pairs - neg_pairs
                gain_diff = torch.pow(2.0, y_tensor) - torch.pow(2.0, y_tensor.t())
                rank_order_tensor = rank_order.view(-1, 1)
                decay_diff = 1.0 / torch.log2(rank_order_tensor + 1.0) - 1.0 / torch.log2(rank_order_tensor.t() + 1.0)
                delta_ndcg = torch.abs(denom * gain_diff * decay_diff)
                lambda_i = sigma * (0.5 * (1 - Sij) - 1 / score_diff) * delta_ndcg
                lambda_i = torch.sum(lambda_i, 1, keepdim=True)
                grad_batch.append(lambda_i)

            count += 1
            if count % batch_size == 0:
                for grad, y_pred in zip(grad_batch, y_pred_batch):
                    y_pred.backward(grad / batch_size)
                optimizer.step()
                net.zero_grad()
                grad_batch, y_pred_batch = [], []
                step += 1

        print("epoch {} steps {} vali ndcg@10 {:.4f}".format(i + 1, step, eval_ndcg_at_k(net, vali_queries)))


if __name__ == "__main__":
    train()
