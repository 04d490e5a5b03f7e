"""Pre-train a tiny LLaMA-style causal LM (tiny-llm-zh style PTM stage) on a packed token
corpus: the tokenised documents are concatenated into a uint16 .bin file, cut into
max_length blocks by PTMDataset and fed to TinyllmForCausalLM, which computes its own
shifted next-token loss like a HF causal LM."""
import math
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

N_KEYS = 32
VOCAB_SIZE = 2 * N_KEYS + 2
BOS_ID, EOS_ID = 2 * N_KEYS, 2 * N_KEYS + 1
MAX_LENGTH = 64


def build_pretrain_bin(path, n_docs, seed):
    """Toy 'dictionary' documents: BOS k1 v1 k2 v2 ... EOS, where every value is the
    fixed translation of the key right before it."""
    rng = np.random.default_rng(seed)
    table = np.random.default_rng(1234).permutation(N_KEYS) + N_KEYS
    tokens = []
    for _ in range(n_docs):
        n_pairs = int(rng.integers(6, 18))
        keys = rng.integers(0, N_KEYS, n_pairs)
        doc = [BOS_ID]
        for k in keys:
            doc += [int(k), int(table[k])]
        doc.append(EOS_ID)
        tokens += doc
    np.array(tokens, dtype=np.uint16).tofile(path)
    return table


class PTMDataset(Dataset):
    def __init__(self, data_path_list, max_length=MAX_LENGTH):
        super(PTMDataset, self).__init__()
        data_list = []
        for data_path in data_path_list:
            with open(data_path, 'rb') as f:
                data = np.fromfile(f, dtype=np.uint16)
                data_list.append(data)
        data = np.concatenate(data_list)
        data = data[:max_length * int(len(data) / max_length)]
        self.data = data.reshape(-1, max_length)
        self.shuffle_index = list(range(len(self.data)))
        random.shuffle(self.shuffle_index)
        print("train data.shape:{}".format(self.data.shape))

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index: int):
        index = self.shuffle_index[index]
        sample = self.data[index]
        X = np.array(sample[:-1]).astype(np.int64)
        Y = np.array(sample[1:]).astype(np.int64)
        input_ids = torch.LongTensor(X)
        labels = torch.LongTensor(Y)
        return {
            "input_ids": input_ids,
            "labels": labels,
        }


class TinyllmConfig:
    vocab_size = VOCAB_SIZE
    hidden_size = 64
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 128
    max_position_embeddings = 128


class TinyllmForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads,
                                           config.intermediate_size, dropout=0.0,
                                           activation='gelu', batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, labels=None):
        T = input_ids.size(1)
        pos = torch.arange(T, device=input_ids.device)
        h = self.embed_tokens(input_ids) + self.embed_positions(pos)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.layers(h, mask=mask, is_causal=True)
        logits = self.lm_head(self.norm(h))
        loss = None
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, self.config.vocab_size),
                                   shift_labels.view(-1), ignore_index=-100)
        return logits, loss


@torch.no_grad()
def evaluate(model, loader, table):
    model.eval()
    total, n, hit, count = 0.0, 0, 0, 0
    for batch in loader:
        logits, loss = model(batch["input_ids"], batch["labels"])
        total += loss.item()
        n += 1
        # how often the model continues a key with its translation
        ids = batch["input_ids"]
        is_key = ids[:, :-1] < N_KEYS
        pred = logits[:, :-1].argmax(-1)
        hit += (pred[is_key] == ids[:, 1:][is_key]).sum().item()
        count += is_key.sum().item()
    model.train()
    return total / n, hit / max(count, 1)


def main(workdir):
    train_bin = os.path.join(workdir, "pretrain_train.bin")
    valid_bin = os.path.join(workdir, "pretrain_valid.bin")
    table = build_pretrain_bin(train_bin, n_docs=2100, seed=1)
    build_pretrain_bin(valid_bin, n_docs=200, seed=2)

    train_ds = PTMDataset([train_bin])
    valid_ds = PTMDataset([valid_bin])
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=False, drop_last=True)
    valid_loader = DataLoader(valid_ds, batch_size=32)

    config = TinyllmConfig()
    model = TinyllmForCausalLM(config)
    print("model params: %.2fM" % (sum(p.numel() for p in model.parameters()) / 1e6))

    num_train_epochs = 3
    learning_rate = 3e-3
    warmup_steps = 20
    max_steps = num_train_epochs * len(train_loader)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)

    def lr_lambda(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    print("max_steps: %d, ln(vocab)=%.3f, ln(n_keys)=%.3f" % (max_steps, math.log(VOCAB_SIZE), math.log(N_KEYS)))
    global_step = 0
    model.train()
    for epoch in range(num_train_epochs):
        running = 0.0
        for step, batch in enumerate(train_loader):
            _, loss = model(batch["input_ids"], batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            global_step += 1
            running += loss.item()
            if global_step % 25 == 0:
                print("step %4d | loss %.4f | lr %.2e" % (global_step, loss.item(), scheduler.get_last_lr()[0]))
        val_loss, kv_acc = evaluate(model, valid_loader, table)
        print("epoch %d | train loss %.4f | eval loss %.4f | key->value acc %.3f"
              % (epoch + 1, running / len(train_loader), val_loss, kv_acc))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="tinyllm_ptm_") as workdir:
        main(workdir)
