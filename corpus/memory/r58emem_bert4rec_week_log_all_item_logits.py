"""BERT4Rec (as in BERT4Rec-VAE-Pytorch) on a custom click log: masked-item prediction over
each user's item sequence with a 2-block bidirectional transformer, then Recall/NDCG@10 on the
held-out last item against 100 sampled negatives. The log is synthetic: a week of sessions in
which new items are released every day."""
import argparse
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data_utils

parser = argparse.ArgumentParser()
parser.add_argument('--days', type=int, default=7)
args = parser.parse_args()

# templates.py: train_bert
args.train_batch_size = 128
args.val_batch_size = 128
args.lr = 0.001
args.num_epochs = 2
args.metric_ks = [1, 5, 10]
args.bert_dropout = 0.1
args.bert_hidden_units = 64
args.bert_mask_prob = 0.15
args.bert_max_len = 100
args.bert_num_blocks = 2
args.bert_num_heads = 4
args.model_init_seed = 0

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)


def build_click_log(days, users_per_day=50, new_items_per_day=850, n_topics=40):
    """Each day new items are released; users browse one topic, mostly recent items, in order."""
    rng = np.random.RandomState(1)
    topic_items = [[] for _ in range(n_topics)]
    user_seqs = {}
    next_item = 1
    for day in range(days):
        for _ in range(new_items_per_day):
            topic_items[rng.randint(n_topics)].append(next_item)
            next_item += 1
        for u in range(users_per_day):
            topic = rng.randint(n_topics)
            pool = topic_items[topic][-60:]
            start = rng.randint(len(pool))
            length = rng.randint(40, 140)
            seq = [pool[(start + k + (rng.rand() < 0.2)) % len(pool)] for k in range(length)]
            user_seqs[len(user_seqs) + 1] = seq
    item_count = next_item - 1
    return user_seqs, item_count


class BertTrainDataset(data_utils.Dataset):
    def __init__(self, u2seq, max_len, mask_prob, mask_token, num_items, rng):
        self.u2seq = u2seq
        self.users = sorted(self.u2seq.keys())
        self.max_len = max_len
        self.mask_prob = mask_prob
        self.mask_token = mask_token
        self.num_items = num_items
        self.rng = rng

    def __len__(self):
        return len(self.users)

    def __getitem__(self, index):
        seq = self.u2seq[self.users[index]][-self.max_len:]
        tokens, labels = [], []
        for s in seq:
            prob = self.rng.random()
            if prob < self.mask_prob:
                prob /= self.mask_prob
                if prob < 0.8:
                    tokens.append(self.mask_token)
                elif prob < 0.9:
                    tokens.append(self.rng.randint(1, self.num_items))
                else:
                    tokens.append(s)
                labels.append(s)
            else:
                tokens.append(s)
                labels.append(0)
        mask_len = self.max_len - len(tokens)
        tokens = [0] * mask_len + tokens
        labels = [0] * mask_len + labels
        return torch.LongTensor(tokens), torch.LongTensor(labels)


class BertEvalDataset(data_utils.Dataset):
    def __init__(self, u2seq, u2answer, max_len, mask_token, negative_samples):
        self.u2seq = u2seq
        self.users = sorted(self.u2seq.keys())
        self.u2answer = u2answer
        self.max_len = max_len
        self.mask_token = mask_token
        self.negative_samples = negative_samples

    def __len__(self):
        return len(self.users)

    def __getitem__(self, index):
        user = self.users[index]
        seq = self.u2seq[user]
        candidates = self.u2answer[user] + self.negative_samples[user]
        labels = [1] * len(self.u2answer[user]) + [0] * len(self.negative_samples[user])
        seq = (seq + [self.mask_token])[-self.max_len:]
        seq = [0] * (self.max_len - len(seq)) + seq
        return torch.LongTensor(seq), torch.LongTensor(candidates), torch.LongTensor(labels)


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        self.d_k = d_model // h
        self.h = h
        self.linear_layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])
        self.output_linear = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        batch_size = query.size(0)
        query, key, value = [l(x).view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
                             for l, x in zip(self.linear_layers, (query, key, value))]
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = self.dropout(F.softmax(scores, dim=-1))
        x = torch.matmul(p_attn, value)
        x = x.transpose(1, 2).contiguous().view(batch_size, -1, self.h * self.d_k)
        return self.output_linear(x)


class TransformerBlock(nn.Module):
    def __init__(self, hidden, attn_heads, feed_forward_hidden, dropout):
        super().__init__()
        self.attention = MultiHeadedAttention(h=attn_heads, d_model=hidden, dropout=dropout)
        self.feed_forward = nn.Sequential(nn.Linear(hidden, feed_forward_hidden), nn.GELU(),
                                          nn.Dropout(dropout), nn.Linear(feed_forward_hidden, hidden))
        self.input_norm = nn.LayerNorm(hidden)
        self.output_norm = nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x, mask):
        x = x + self.dropout(self.attention(*([self.input_norm(x)] * 3), mask=mask))
        x = x + self.dropout(self.feed_forward(self.output_norm(x)))
        return self.dropout(x)


class BERT(nn.Module):
    def __init__(self, args):
        super().__init__()
        vocab_size = args.num_items + 2
        self.hidden = args.bert_hidden_units
        self.token = nn.Embedding(vocab_size, self.hidden, padding_idx=0)
        self.position = nn.Embedding(args.bert_max_len, self.hidden)
        self.dropout = nn.Dropout(p=args.bert_dropout)
        self.transformer_blocks = nn.ModuleList([
            TransformerBlock(self.hidden, args.bert_num_heads, self.hidden * 4, args.bert_dropout)
            for _ in range(args.bert_num_blocks)])

    def forward(self, x):
        mask = (x > 0).unsqueeze(1).repeat(1, x.size(1), 1).unsqueeze(1)
        positions = torch.arange(x.size(1)).unsqueeze(0).expand_as(x)
        x = self.dropout(self.token(x) + self.position(positions))
        for transformer in self.transformer_blocks:
            x = transformer.forward(x, mask)
        return x


class BERTModel(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.bert = BERT(args)
        self.out = nn.Linear(self.bert.hidden, args.num_items + 1)

    def forward(self, x):
        x = self.bert(x)
        return self.out(x)


def recalls_and_ndcgs_for_ks(scores, labels, ks):
    metrics = {}
    answer_count = labels.sum(1)
    rank = (-scores).argsort(dim=1)
    for k in sorted(ks, reverse=True):
        cut = rank[:, :k]
        hits = labels.gather(1, cut)
        metrics['Recall@%d' % k] = (hits.sum(1).float() / torch.min(torch.tensor(k), answer_count).float()).mean().item()
        position = torch.arange(2, 2 + k)
        weights = 1 / torch.log2(position.float())
        dcg = (hits.float() * weights).sum(1)
        idcg = torch.tensor([weights[:min(int(n), k)].sum() for n in answer_count])
        metrics['NDCG@%d' % k] = (dcg / idcg).mean().item()
    return metrics


class BERTTrainer:
    def __init__(self, args, model, train_loader, val_loader):
        self.args = args
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        self.ce = nn.CrossEntropyLoss(ignore_index=0)

    def calculate_loss(self, batch):
        seqs, labels = batch
        logits = self.model(seqs)  # B x T x V
        logits = logits.view(-1, logits.size(-1))  # (B*T) x V
        labels = labels.view(-1)  # B*T
        loss = self.ce(logits, labels)
        return loss

    def calculate_metrics(self, batch):
        seqs, candidates, labels = batch
        scores = self.model(seqs)  # B x T x V
        scores = scores[:, -1, :]  # B x V
        scores = scores.gather(1, candidates)  # B x C
        return recalls_and_ndcgs_for_ks(scores, labels, self.args.metric_ks)

    def train(self):
        accum_iter = 0
        self.validate(0)
        for epoch in range(self.args.num_epochs):
            self.model.train()
            average_loss, n = 0.0, 0
            for batch_idx, batch in enumerate(self.train_loader):
                self.optimizer.zero_grad()
                loss = self.calculate_loss(batch)
                loss.backward()
                self.optimizer.step()
                average_loss += loss.item()
                n += 1
                accum_iter += batch[0].size(0)
                if batch_idx % 5 == 0:
                    print('Epoch {}, iter {}, loss {:.3f}'.format(epoch + 1, batch_idx, average_loss / n), flush=True)
            self.validate(epoch + 1)

    def validate(self, epoch):
        self.model.eval()
        metrics = {}
        with torch.no_grad():
            for i, batch in enumerate(self.val_loader):
                for k, v in self.calculate_metrics(batch).items():
                    metrics[k] = metrics.get(k, 0.0) + v / len(self.val_loader)
        print('Val epoch {}: Recall@10 {:.3f} NDCG@10 {:.3f}'.format(
            epoch, metrics['Recall@10'], metrics['NDCG@10']), flush=True)


def main():
    user_seqs, item_count = build_click_log(args.days)
    train = {u: s[:-1] for u, s in user_seqs.items()}
    answers = {u: [s[-1]] for u, s in user_seqs.items()}
    args.num_items = item_count
    rng = random.Random(0)
    negatives = {}
    for u, s in user_seqs.items():
        seen, samples = set(s), []
        while len(samples) < 100:
            item = rng.randint(1, item_count)
            if item not in seen and item not in samples:
                samples.append(item)
        negatives[u] = samples
    print('{} users, {} items, {} interactions'.format(len(user_seqs), item_count,
                                                      sum(len(s) for s in user_seqs.values())))
    train_dataset = BertTrainDataset(train, args.bert_max_len, args.bert_mask_prob, item_count + 1,
                                     item_count, random.Random(args.model_init_seed))
    val_dataset = BertEvalDataset(train, answers, args.bert_max_len, item_count + 1, negatives)
    train_loader = data_utils.DataLoader(train_dataset, batch_size=args.train_batch_size, shuffle=True)
    val_loader = data_utils.DataLoader(val_dataset, batch_size=args.val_batch_size, shuffle=False)
    model = BERTModel(args)
    trainer = BERTTrainer(args, model, train_loader, val_loader)
    trainer.train()


if __name__ == '__main__':
    main()
