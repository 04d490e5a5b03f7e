"""Miniature Switch Transformer (character-level autoregressive model), after labml.ai's annotated
implementation (labml_nn/transformers/switch/__init__.py and experiment.py) without the labml
helpers: tensors are [seq_len, batch_size, d_model], the FFN of each block is replaced by a
switch among 4 expert FFNs with capacity-based token dropping, and a load-balancing loss
n_experts * sum(f_i * P_i) is added with coefficient 0.01. Tiny Shakespeare is replaced by a
synthetic text made from a small word grammar.
"""
import copy
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def make_text(n_chars=60_000):
    rng = random.Random(0)
    subjects = ["the king", "my lord", "a fool", "the queen", "good sir", "this man", "thy son"]
    verbs = ["doth speak", "shall die", "hath said", "will go", "doth love", "must stay", "did see"]
    objects = ["to rome", "of war", "with me", "in peace", "for thee", "at night", "no more"]
    out = []
    while sum(len(s) for s in out) < n_chars:
        line = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
        out.append(line.capitalize() + rng.choice([".\n", ",\n", "!\n", ";\n"]))
    return "".join(out)


class CharTokenizer:
    def __init__(self, text):
        self.itos = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def encode(self, s):
        return torch.tensor([self.stoi[c] for c in s], dtype=torch.long)


class SequentialUnBatchedDataset(Dataset):
    def __init__(self, data, seq_len):
        self.data = data
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.data) - 1) // self.seq_len

    def __getitem__(self, idx):
        start = idx * self.seq_len
        chunk = self.data[start:start + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


def transpose_batch(batch):
    src = torch.stack([b[0] for b in batch], dim=1)
    tgt = torch.stack([b[1] for b in batch], dim=1)
    return src, tgt


def subsequent_mask(seq_len):
    mask = torch.tril(torch.ones(seq_len, seq_len)).to(torch.bool).unsqueeze(-1)
    return mask


class PrepareForMultiHeadAttention(nn.Module):
    def __init__(self, d_model, heads, d_k, bias):
        super().__init__()
        self.linear = nn.Linear(d_model, heads * d_k, bias=bias)
        self.heads = heads
        self.d_k = d_k

    def forward(self, x):
        head_shape = x.shape[:-1]
        x = self.linear(x)
        x = x.view(*head_shape, self.heads, self.d_k)
        return x


class MultiHeadAttention(nn.Module):
    def __init__(self, heads, d_model, dropout_prob=0.1, bias=True):
        super().__init__()
        self.d_k = d_model // heads
        self.heads = heads
        self.query = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=bias)
        self.key = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=bias)
        self.value = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=True)
        self.softmax = nn.Softmax(dim=1)
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout_prob)
        self.scale = 1 / math.sqrt(self.d_k)

    def get_scores(self, query, key):
        return torch.einsum('ibhd,jbhd->ijbh', query, key)

    def forward(self, *, query, key, value, mask=None):
        seq_len, batch_size, _ = query.shape
        if mask is not None:
            mask = mask.unsqueeze(-1)
        query = self.query(query)
        key = self.key(key)
        value = self.value(value)
        scores = self.get_scores(query, key)
        scores *= self.scale
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float('-inf'))
        attn = self.softmax(scores)
        attn = self.dropout(attn)
        x = torch.einsum("ijbh,jbhd->ibhd", attn, value)
        x = x.reshape(seq_len, batch_size, -1)
        return self.output(x)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.layer1 = nn.Linear(d_model, d_ff)
        self.layer2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = nn.ReLU()

    def forward(self, x):
        return self.layer2(self.dropout(self.activation(self.layer1(x))))


def clone_module_list(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class SwitchFeedForward(nn.Module):
    def __init__(self, *, capacity_factor, drop_tokens, is_scale_prob, n_experts, expert, d_model):
        super().__init__()
        self.capacity_factor = capacity_factor
        self.is_scale_prob = is_scale_prob
        self.n_experts = n_experts
        self.drop_tokens = drop_tokens
        self.experts = clone_module_list(expert, n_experts)
        self.switch = nn.Linear(d_model, n_experts)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        seq_len, batch_size, d_model = x.shape
        x = x.view(-1, d_model)
        route_prob = self.softmax(self.switch(x))
        route_prob_max, routes = torch.max(route_prob, dim=-1)
        indexes_list = [torch.eq(routes, i).nonzero(as_tuple=True)[0] for i in range(self.n_experts)]
        final_output = x.new_zeros(x.shape)
        capacity = int(self.capacity_factor * len(x) / self.n_experts)
        counts = x.new_tensor([len(indexes_list[i]) for i in range(self.n_experts)])
        dropped = []
        if self.drop_tokens:
            for i in range(self.n_experts):
                if len(indexes_list[i]) <= capacity:
                    continue
                indexes_list[i] = indexes_list[i][torch.randperm(len(indexes_list[i]))]
                dropped.append(indexes_list[i][capacity:])
                indexes_list[i] = indexes_list[i][:capacity]
        expert_output = [self.experts[i](x[indexes_list[i], :]) for i in range(self.n_experts)]
        for i in range(self.n_experts):
            final_output[indexes_list[i], :] = expert_output[i]
        if dropped:
            dropped = torch.cat(dropped)
            final_output[dropped, :] = x[dropped, :]
        if self.is_scale_prob:
            factor = route_prob_max
        else:
            factor = route_prob_max / route_prob_max.detach()
        final_output = final_output * factor.view(-1, 1)
        final_output = final_output.view(seq_len, batch_size, d_model)
        return final_output, counts, route_prob.sum(0), len(dropped)


class SwitchTransformerLayer(nn.Module):
    def __init__(self, *, d_model, attn, feed_forward, dropout_prob):
        super().__init__()
        self.size = d_model
        self.attn = attn
        self.feed_forward = feed_forward
        self.dropout = nn.Dropout(dropout_prob)
        self.norm_self_attn = nn.LayerNorm([d_model])
        self.norm_ff = nn.LayerNorm([d_model])

    def forward(self, *, x, mask):
        z = self.norm_self_attn(x)
        self_attn = self.attn(query=z, key=z, value=z, mask=mask)
        x = x + self.dropout(self_attn)
        z = self.norm_ff(x)
        ff, counts, route_prob, n_dropped = self.feed_forward(z)
        x = x + self.dropout(ff)
        return x, counts, route_prob, n_dropped


class SwitchTransformer(nn.Module):
    def __init__(self, layer, n_layers):
        super().__init__()
        self.layers = clone_module_list(layer, n_layers)
        self.norm = nn.LayerNorm([layer.size])

    def forward(self, x, mask):
        counts, route_prob, n_dropped = [], [], []
        for layer in self.layers:
            x, f, p, n_d = layer(x=x, mask=mask)
            counts.append(f)
            route_prob.append(p)
            n_dropped.append(n_d)
        x = self.norm(x)
        return x, torch.stack(counts), torch.stack(route_prob), n_dropped


class AutoregressiveModel(nn.Module):
    def __init__(self, n_vocab, d_model, transformer):
        super().__init__()
        self.src_embed = nn.Embedding(n_vocab, d_model)
        self.transformer = transformer
        self.generator = nn.Linear(d_model, n_vocab)
        self.mask = None

    def forward(self, x):
        if self.mask is None or self.mask.size(0) != len(x):
            self.mask = subsequent_mask(len(x)).to(x.device)
        x = self.src_embed(x)
        res, counts, route_prob, n_dropped = self.transformer(x, self.mask)
        res = self.generator(res)
        return res, counts, route_prob, n_dropped


class NoamSchedule:
    def __init__(self, d_model, warmup):
        self.d_model = d_model
        self.warmup = warmup

    def __call__(self, step):
        step = max(step, 1)
        return self.d_model ** (-0.5) * min(step ** (-0.5), step * self.warmup ** (-1.5))


d_model = 64
heads = 4
dropout = 0.0
d_ff = 128
n_layers = 2
n_experts = 4
load_balancing_loss_ceof = 0.01
is_scale_prob = True
drop_tokens = True
capacity_factor = 1.2
seq_len = 32
batch_size = 16
epochs = 2
grad_norm_clip = 1.0
learning_rate = 1.0
warmup = 200

text = make_text()
tokenizer = CharTokenizer(text)
data = tokenizer.encode(text)
n_train = int(len(data) * 0.9)
train_ds = SequentialUnBatchedDataset(data[:n_train], seq_len)
valid_ds = SequentialUnBatchedDataset(data[n_train:], seq_len)
train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, collate_fn=transpose_batch, drop_last=True)
valid_loader = DataLoader(valid_ds, batch_size=batch_size, shuffle=True, collate_fn=transpose_batch)
n_tokens = len(tokenizer.itos)
print(f"vocab {n_tokens}, train batches per epoch {len(train_loader)}")

model = AutoregressiveModel(
    n_tokens, d_model,
    SwitchTransformer(
        SwitchTransformerLayer(d_model=d_model,
                               attn=MultiHeadAttention(heads, d_model, dropout),
                               feed_forward=SwitchFeedForward(capacity_factor=capacity_factor,
                                                              drop_tokens=drop_tokens,
                                                              is_scale_prob=is_scale_prob,
                                                              n_experts=n_experts,
                                                              expert=FeedForward(d_model, d_ff, dropout),
                                                              d_model=d_model),
                               dropout_prob=dropout),
        n_layers))
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, betas=(0.9, 0.999), eps=1e-8)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(d_model, warmup))
loss_func = nn.CrossEntropyLoss()


def step(batch, train):
    data, target = batch
    output, counts, route_prob, n_dropped = model(data)
    cross_entropy_loss = loss_func(output.view(-1, output.shape[-1]), target.view(-1))
    total = counts.sum(dim=-1, keepdims=True)
    route_frac = counts / total
    route_prob = route_prob / total
    load_balancing_loss = n_experts * (route_frac * route_prob).sum()
    loss = cross_entropy_loss + load_balancing_loss_ceof * load_balancing_loss
    accuracy = (output.argmax(-1) == target).float().mean()
    if train:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_norm_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    dropped_frac = sum(n_dropped) / total.sum().item()
    return cross_entropy_loss.item(), load_balancing_loss.item(), accuracy.item(), dropped_frac, route_frac


global_step = 0
for epoch in range(epochs):
    model.train()
    for batch in train_loader:
        ce, lb, acc, dropped, route_frac = step(batch, train=True)
        global_step += 1
        if global_step == 1 or global_step % 20 == 0:
            print(f"step {global_step:4d} | loss {ce:.4f} | lb_loss {lb:.3f} | acc {acc:.3f} | "
                  f"dropped {dropped:.3f} | route.max {route_frac.max().item():.3f} | "
                  f"lr {scheduler.get_last_lr()[0]:.2e}")
    model.eval()
    with torch.no_grad():
        losses = [step(batch, train=False)[0] for batch in valid_loader]
    print(f"epoch {epoch} | valid loss {sum(losses) / len(losses):.4f}")

model.eval()
with torch.no_grad():
    prompt = tokenizer.encode("The king ").unsqueeze(1)
    for _ in range(40):
        out, *_ = model(prompt[-seq_len:])
        prompt = torch.cat([prompt, out[-1].argmax(-1, keepdim=True)])
print("sample:", repr("".join(tokenizer.itos[i] for i in prompt.squeeze(1).tolist())))
