"""KBGAN-style TransE pretraining on a small synthetic knowledge graph.

Pretrains the TransE generator with a margin loss against corrupted triples and
runs link prediction (MRR / Hits@10) on the validation triples every few epochs.
"""
import logging
import math
import random

import numpy as np
import torch as t
import torch.nn as nn
import yaml

CONFIG_YAML = """
pretrain_config: TransE
task:
  dir: synth_kg
  type: link
  test_batch_size: 100
TransE:
  dim: 32
  margin: 3
  p: 1
  n_epoch: 20
  n_batch: 10
  epoch_per_test: 5
"""


class ConfigDict(dict):
    __getattr__ = dict.__getitem__


def _make_config_dict(obj):
    if isinstance(obj, dict):
        return ConfigDict({k: _make_config_dict(v) for k, v in obj.items()})
    elif isinstance(obj, list):
        return [_make_config_dict(x) for x in obj]
    return obj


_config = None


def config():
    global _config
    if _config is None:
        _config = _make_config_dict(yaml.safe_load(CONFIG_YAML))
    return _config


def make_kg(n_ent=300, n_rel=12, n_triples=1200, dim=8, seed=0):
    g = np.random.RandomState(seed)
    ent = g.randn(n_ent, dim)
    rel = g.randn(n_rel, dim) * 0.7
    heads = g.randint(0, n_ent, n_triples)
    rels = g.randint(0, n_rel, n_triples)
    tails = np.empty(n_triples, dtype=np.int64)
    for i, (h, r) in enumerate(zip(heads, rels)):
        d = np.abs(ent - (ent[h] + rel[r])).sum(1)
        d[h] = np.inf
        tails[i] = np.argsort(d)[g.randint(0, 3)]
    return n_ent, n_rel, t.from_numpy(heads), t.from_numpy(rels), t.from_numpy(tails)


def batch_by_num(n_batch, *lists, n_sample=None):
    if n_sample is None:
        n_sample = len(lists[0])
    for i in range(n_batch):
        start = int(n_sample * i / n_batch)
        end = int(n_sample * (i + 1) / n_batch)
        yield [ls[start:end] for ls in lists]


def batch_by_size(batch_size, *lists, n_sample=None):
    if n_sample is None:
        n_sample = len(lists[0])
    start = 0
    while start < n_sample:
        end = min(n_sample, start + batch_size)
        yield [ls[start:end] for ls in lists]
        start = end


class Corrupter:
    def __init__(self, n_ent):
        self.n_ent = n_ent

    def corrupt(self, src, rel, dst):
        n = len(src)
        flip = t.rand(n) < 0.5
        rand_ent = t.randint(0, self.n_ent, (n,))
        src_c = t.where(flip, rand_ent, src)
        dst_c = t.where(flip, dst, rand_ent)
        return src_c, dst_c


class TransEModule(nn.Module):
    def __init__(self, n_ent, n_rel, config):
        super().__init__()
        self.p = config.p
        self.margin = config.margin
        self.rel_embed = nn.Embedding(n_rel, config.dim)
        self.ent_embed = nn.Embedding(n_ent, config.dim)
        self.init_weight()

    def init_weight(self):
        for param in self.parameters():
            param.data.normal_(1 / param.size(1) ** 0.5)
            param.data.renorm_(2, 0, 1)

    def forward(self, src, rel, dst):
        return t.norm(self.ent_embed(dst) - self.ent_embed(src) - self.rel_embed(rel) + 1e-30, p=self.p, dim=-1)

    def pair_loss(self, src, rel, dst, src_bad, dst_bad):
        d_good = self(src, rel, dst)
        d_bad = self(src_bad, rel, dst_bad)
        return t.relu(self.margin + d_good - d_bad)

    def constraint(self):
        self.ent_embed.weight.data.renorm_(2, 0, 1)
        self.rel_embed.weight.data.renorm_(2, 0, 1)


class TransE:
    def __init__(self, n_ent, n_rel, config):
        self.mdl = TransEModule(n_ent, n_rel, config)
        self.config = config
        self.n_ent = n_ent

    def test_link(self, test_data):
        src, rel, dst = test_data
        self.mdl.eval()
        rr, hits10 = [], []
        all_ent = t.arange(self.n_ent)
        with t.no_grad():
            for batch_s, batch_r, batch_t in batch_by_size(config().test_batch_size, src, rel, dst):
                b = len(batch_s)
                scores = self.mdl(batch_s.unsqueeze(1).expand(b, self.n_ent),
                                  batch_r.unsqueeze(1).expand(b, self.n_ent),
                                  all_ent.unsqueeze(0).expand(b, self.n_ent))
                true_score = scores.gather(1, batch_t.unsqueeze(1))
                rank = (scores < true_score).sum(1) + 1
                rr.append((1.0 / rank.float()))
                hits10.append((rank <= 10).float())
        self.mdl.train()
        mrr = t.cat(rr).mean().item()
        h10 = t.cat(hits10).mean().item()
        logging.info('MRR=%f, Hits@10=%f', mrr, h10)
        print(f'  [test] MRR={mrr:.4f}  Hits@10={h10:.4f}')
        return mrr

    def pretrain(self, train_data, corrupter, tester):
        src, rel, dst = train_data
        n_train = len(src)
        optimizer = t.optim.Adam(self.mdl.parameters(), lr=1e-2)
        n_epoch = self.config.n_epoch
        n_batch = self.config.n_batch
        best_perf = 0
        step = 0
        for epoch in range(n_epoch):
            epoch_loss = 0
            rand_idx = t.randperm(n_train)
            src = src[rand_idx]
            rel = rel[rand_idx]
            dst = dst[rand_idx]
            src_corrupted, dst_corrupted = corrupter.corrupt(src, rel, dst)
            for s0, r, t0, s1, t1 in batch_by_num(n_batch, src, rel, dst, src_corrupted, dst_corrupted,
                                                  n_sample=n_train):
                self.mdl.zero_grad()
                loss = t.sum(self.mdl.pair_loss(s0, r, t0, s1, t1))
                loss.backward()
                optimizer.step()
                self.mdl.constraint()
                epoch_loss += loss.item()
                step += 1
            print(f'Epoch {epoch + 1}/{n_epoch}, step {step}, Loss={epoch_loss / n_train:.4f}')
            if (epoch + 1) % self.config.epoch_per_test == 0:
                test_perf = tester()
                if test_perf > best_perf:
                    best_perf = test_perf
        return best_perf


def main():
    logging.basicConfig(level=logging.WARNING)
    random.seed(0)
    np.random.seed(0)
    t.manual_seed(0)

    n_ent, n_rel, heads, rels, tails = make_kg()
    n_valid = 200
    train_data = (heads[n_valid:], rels[n_valid:], tails[n_valid:])
    valid_data = (heads[:n_valid], rels[:n_valid], tails[:n_valid])
    print(f'{n_ent} entities, {n_rel} relations, {len(train_data[0])} train / {n_valid} valid triples')

    mdl_type = config().pretrain_config
    gen_config = config()[mdl_type]
    gen = TransE(n_ent, n_rel, gen_config)
    corrupter = Corrupter(n_ent)
    tester = lambda: gen.test_link(valid_data)
    best = gen.pretrain(train_data, corrupter, tester)
    print(f'best MRR {best:.4f}')


if __name__ == '__main__':
    main()
