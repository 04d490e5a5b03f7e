"""DLRM-style click-through-rate model on a small synthetic Criteo-like data set.

Dense features go through the bottom MLP, each sparse feature through an
EmbeddingBag; the "dot" interaction of all vectors feeds the top MLP that
predicts the click. The MLPs and embedding tables are built the same way
as in the reference dlrm_s_pytorch.py.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class RandomCTRData(Dataset):
    def __init__(self, n, m_den, ln_emb, seed):
        rng = np.random.RandomState(seed)
        self.dense = rng.lognormal(0.0, 1.0, size=(n, m_den)).astype(np.float32)
        self.dense = np.log1p(self.dense)
        self.sparse = np.stack([rng.randint(0, size, n) for size in ln_emb], axis=1)
        w_den = rng.normal(0, 1.0, m_den)
        effects = [rng.normal(0, 1.0, size) for size in ln_emb]
        logit = (self.dense - self.dense.mean(0)) @ w_den
        for k, eff in enumerate(effects):
            logit = logit + 0.3 * eff[self.sparse[:, k]]
        logit = 3.0 * logit / logit.std() - 0.5
        p = 1.0 / (1.0 + np.exp(-logit))
        self.target = (rng.rand(n) < p).astype(np.float32)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return self.dense[i], self.sparse[i], self.target[i]


def collate_wrapper(batch):
    dense, sparse, target = zip(*batch)
    X = torch.tensor(np.stack(dense))
    sparse = torch.tensor(np.stack(sparse), dtype=torch.long)
    batch_size, n_emb = sparse.shape
    lS_i = [sparse[:, k] for k in range(n_emb)]
    lS_o = [torch.arange(batch_size) for _ in range(n_emb)]
    T = torch.tensor(target).view(-1, 1)
    return X, lS_o, lS_i, T


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]

            LL = nn.Linear(int(n), int(m), bias=True)

            # custom Xavier input, output or two-sided fill
            mean = 0.0
            std_dev = np.sqrt(2 / (m + n))
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)

            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, ln.size):
            n = ln[i]
            W = np.random.uniform(low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)).astype(np.float32)
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False, _weight=torch.tensor(W, requires_grad=True))
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top, sigmoid_bot=-1, sigmoid_top=-1):
        super(DLRM_Net, self).__init__()
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        (batch_size, d) = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        li = torch.tensor([i for i in range(ni) for j in range(i)])
        lj = torch.tensor([j for i in range(nj) for j in range(i)])
        Zflat = Z[:, li, lj]
        R = torch.cat([x] + [Zflat], dim=1)
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.bot_l(dense_x)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.top_l(z)
        return p


def main():
    parser = argparse.ArgumentParser(description="Train Deep Learning Recommendation Model (DLRM)")
    parser.add_argument("--arch-sparse-feature-size", type=int, default=16)
    parser.add_argument("--arch-embedding-size", type=str, default="200-300-100-500-50-400-250-150")
    parser.add_argument("--arch-mlp-bot", type=str, default="13-128-16")
    parser.add_argument("--arch-mlp-top", type=str, default="256-128-1")
    parser.add_argument("--sigmoid-top", type=int, default=-1)
    parser.add_argument("--loss-function", type=str, default="mse")
    parser.add_argument("--mini-batch-size", type=int, default=128)
    parser.add_argument("--num-batches", type=int, default=200)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--print-freq", type=int, default=25)
    parser.add_argument("--numpy-rand-seed", type=int, default=123)
    args = parser.parse_args()

    np.random.seed(args.numpy_rand_seed)
    torch.manual_seed(args.numpy_rand_seed)

    ln_emb = np.fromstring(args.arch_embedding_size, dtype=int, sep="-")
    ln_bot = np.fromstring(args.arch_mlp_bot, dtype=int, sep="-")
    m_spa = args.arch_sparse_feature_size
    num_fea = ln_emb.size + 1
    num_int = (num_fea * (num_fea - 1)) // 2 + ln_bot[-1]
    ln_top = np.fromstring(str(num_int) + "-" + args.arch_mlp_top, dtype=int, sep="-")

    train_data = RandomCTRData(args.num_batches * args.mini_batch_size, ln_bot[0], ln_emb, seed=7)
    train_ld = DataLoader(train_data, batch_size=args.mini_batch_size, shuffle=True, collate_fn=collate_wrapper)
    print("clicks in train set: {:.3f}".format(train_data.target.mean()))

    dlrm = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top, sigmoid_bot=-1, sigmoid_top=args.sigmoid_top)
    if args.loss_function == "mse":
        loss_fn = torch.nn.MSELoss(reduction="mean")
    else:
        loss_fn = torch.nn.BCELoss(reduction="mean")
    optimizer = torch.optim.SGD(dlrm.parameters(), lr=args.learning_rate)

    total_loss, total_acc, total_samp, total_iter = 0.0, 0.0, 0, 0
    t0 = time.time()
    for j, (X, lS_o, lS_i, T) in enumerate(train_ld):
        Z = dlrm(X, lS_o, lS_i)
        E = loss_fn(Z, T)

        optimizer.zero_grad()
        E.backward()
        optimizer.step()

        mbs = T.shape[0]
        total_loss += E.item() * mbs
        total_acc += (Z.detach().round() == T).sum().item()
        total_samp += mbs
        total_iter += 1
        if (j + 1) % args.print_freq == 0:
            print("Finished training it {}/{}, {:.2f} ms/it, loss {:.6f}, accuracy {:3.3f} %".format(
                j + 1, len(train_ld), 1000.0 * (time.time() - t0) / total_iter,
                total_loss / total_samp, 100.0 * total_acc / total_samp))
            total_loss, total_acc, total_samp, total_iter = 0.0, 0.0, 0, 0
            t0 = time.time()


if __name__ == "__main__":
    main()
