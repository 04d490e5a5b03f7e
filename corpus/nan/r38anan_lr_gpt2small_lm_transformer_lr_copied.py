"""Train a small GPT-2 style language model (GPT2Small layout, shrunk to fit a laptop)
on a tokenised corpus, with Adam and a linear warmup + cosine decay schedule."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1234)

config = {
    "vocab_size": 512,
    "maximum_length": 64,
    "num_layers": 2,
    "num_units": 128,
    "num_heads": 4,
    "ffn_inner_dim": 512,
    "dropout": 0.0,
    "params": {
        "optimizer": "Adam",
        "optimizer_params": {"beta_1": 0.9, "beta_2": 0.998},
        "learning_rate": 2.0,
        "decay_type": "CosineAnnealing",
        "decay_params": {"max_step": 400, "warmup_steps": 40},
    },
    "train": {"batch_size": 16, "epochs": 3},
}


def make_corpus(n_tokens, vocab_size):
    successors = torch.randint(4, vocab_size, (vocab_size, 6)).tolist()
    choice = torch.randint(0, 6, (n_tokens,)).tolist()
    tokens, cur = [], 3
    for i in range(n_tokens):
        if i % 97 == 0:
            tokens.append(2)
            cur = 2
        cur = successors[cur][choice[i]]
        tokens.append(cur)
    return torch.tensor(tokens)


class LMChunks(Dataset):
    def __init__(self, tokens, length):
        self.tokens = tokens
        self.length = length

    def __len__(self):
        return (len(self.tokens) - 1) // self.length

    def __getitem__(self, i):
        s = i * self.length
        chunk = self.tokens[s:s + self.length + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d, heads, inner, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, inner), nn.GELU(), nn.Linear(inner, d), nn.Dropout(dropout))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["num_units"]
        self.wte = nn.Embedding(cfg["vocab_size"], d)
        self.wpe = nn.Embedding(cfg["maximum_length"], d)
        self.drop = nn.Dropout(cfg["dropout"])
        self.h = nn.ModuleList([Block(d, cfg["num_heads"], cfg["ffn_inner_dim"], cfg["dropout"])
                                for _ in range(cfg["num_layers"])])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids):
        t = ids.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(t)))
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


def cosine_with_warmup(step, warmup_steps, max_step):
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, max_step - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


tokens = make_corpus(36000, config["vocab_size"])
split = int(0.9 * len(tokens))
train_ds = LMChunks(tokens[:split], config["maximum_length"])
valid_ds = LMChunks(tokens[split:], config["maximum_length"])
train_loader = DataLoader(train_ds, batch_size=config["train"]["batch_size"], shuffle=True, drop_last=True)
valid_loader = DataLoader(valid_ds, batch_size=64)

model = GPT2(config)
params = config["params"]
optimizer = torch.optim.Adam(model.parameters(), lr=params["learning_rate"],
                             betas=(params["optimizer_params"]["beta_1"], params["optimizer_params"]["beta_2"]))
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: cosine_with_warmup(s, params["decay_params"]["warmup_steps"], params["decay_params"]["max_step"]))

step = 0
for epoch in range(config["train"]["epochs"]):
    model.train()
    running = 0.0
    for ids, labels in train_loader:
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        running += loss.item()
        if step % 20 == 0:
            print(f"Step = {step} ; Learning rate = {scheduler.get_last_lr()[0]:.6f} ; Loss = {loss.item():.4f}")

    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for ids, labels in valid_loader:
            logits = model(ids)
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="sum").item()
            count += labels.numel()
    val_loss = total / count
    print(f"epoch {epoch + 1}: train loss {running / len(train_loader):.4f}  "
          f"eval loss {val_loss:.4f}  eval perplexity {math.exp(min(val_loss, 50)):.2f}")
