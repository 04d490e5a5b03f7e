"""Process Q-value model (PQM) for step-level verification of math solutions: a small causal
transformer with a value head scores every [PRM] step token and is trained with the
comparative ranking loss over correct / incorrect steps (Math-Shepherd style labels)."""
import argparse
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, DataLoader


def seed_everything(seed=0):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


VOCAB = 64
PAD, PRM, BOS = 0, 1, 2
ERR_TOKENS = list(range(3, 11))      # tokens that only appear in wrong steps
OK_TOKENS = list(range(11, VOCAB))


def generate_dataset(n, rng):
    queries = []
    for _ in range(n):
        question = [BOS] + [rng.choice(OK_TOKENS) for _ in range(6)]
        n_steps = rng.randint(3, 6)
        first_wrong = rng.randint(1, n_steps + 1) if rng.random() < 0.6 else n_steps + 1
        ids, labels = list(question), []
        for s in range(1, n_steps + 1):
            step = [rng.choice(OK_TOKENS) for _ in range(5)]
            if s == first_wrong:
                step[rng.randrange(5)] = rng.choice(ERR_TOKENS)
            ids += step + [PRM]
            labels.append(1 if s < first_wrong else 0)
        queries.append({"input_ids": ids, "labels": labels})
    return queries


class TrainDataset(Dataset):
    """Pre-batched like the original: every item is a chunk of queries."""

    def __init__(self, queries, chunk):
        self.dataset = [queries[i:i + chunk] for i in range(0, len(queries), chunk)]

    def __getitem__(self, index):
        return self.dataset[index]

    def __len__(self):
        return len(self.dataset)


def data_collator(example):
    example = example[0]
    inputs, special_ids, step_labels, has_neg = [], [], [], []
    for d in example:
        ids = d["input_ids"]
        inputs.append(torch.tensor(ids))
        special_ids.append(torch.tensor([i for i, t in enumerate(ids) if t == PRM]))
        step_labels.append(torch.tensor(d["labels"]))
        has_neg.append(1 if 0 in d["labels"] else 0)
    inputs = pad_sequence(inputs, padding_value=PAD, batch_first=True)
    return {
        "input_ids": inputs,
        "attention_mask": (inputs != PAD).int(),
        "special_tokens": pad_sequence(special_ids, padding_value=0, batch_first=True),
        "step_labels": pad_sequence(step_labels, padding_value=-100, batch_first=True),
        "has_neg": torch.tensor(has_neg),
    }


class CausalLMWithValueHead(nn.Module):
    def __init__(self, d_model=48, n_layers=2, n_heads=4, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers)
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, VOCAB, bias=False)
        self.v_head = nn.Linear(d_model, 1)

    def forward(self, input_ids, attention_mask):
        T = input_ids.size(1)
        x = self.embed(input_ids) + self.pos(torch.arange(T))
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.ln_f(self.blocks(x, mask=causal, src_key_padding_mask=attention_mask == 0))
        return self.lm_head(h), None, self.v_head(h).squeeze(-1)


def ranking_loss(rewards, labels, has_neg, zeta):
    pos_rewards_exp = torch.where(labels == 1, rewards.exp(), 0)
    neg_rewards_exp = torch.where(labels == 0, (rewards + zeta).exp(), 0).flip(dims=[-1])
    neg_reward_sum = neg_rewards_exp.sum(-1)
    pos_rewards_ = torch.where(labels == 1, rewards.exp(), 0)
    pos_rewards_cumsum = torch.cat([torch.zeros(rewards.shape[0], 1), pos_rewards_.cumsum(-1)[:, 1:]], dim=1)
    reward_exp_cur = torch.where(labels == 1, pos_rewards_exp, 1)
    reward_exp_cur = torch.cat([torch.zeros(rewards.shape[0], 1).exp(), reward_exp_cur], dim=-1)
    pos_rewards_cumsum = torch.cat([torch.zeros(rewards.shape[0], 1),
                                    pos_rewards_cumsum + torch.zeros(rewards.shape[0], 1).exp()], dim=-1)
    loss = -torch.log(reward_exp_cur / (reward_exp_cur + pos_rewards_cumsum + neg_reward_sum[..., None] + 1e-5))
    labels = torch.cat([has_neg[..., None], labels], dim=-1)
    return (torch.where(labels == 1, loss, 0).sum(-1) / torch.where(labels == 1, 1, 0).sum(-1)).mean()


def compute_loss(model, inputs, zeta):
    _, _, rewards = model(inputs["input_ids"], inputs["attention_mask"])
    rewards = rewards.gather(dim=-1, index=inputs["special_tokens"])
    return ranking_loss(rewards, inputs["step_labels"], inputs["has_neg"], zeta), rewards


@torch.no_grad()
def evaluate(model, loader, zeta):
    model.eval()
    losses, good, total = [], 0, 0
    for inputs in loader:
        loss, rewards = compute_loss(model, inputs, zeta)
        losses.append(loss.item())
        lab = inputs["step_labels"]
        for r, l in zip(rewards, lab):
            pos, neg = r[l == 1], r[l == 0]
            if len(pos) and len(neg):
                good += (pos[:, None] > neg[None, :]).sum().item()
                total += len(pos) * len(neg)
    model.train()
    return sum(losses) / len(losses), good / max(total, 1)


def cosine_with_warmup(optimizer, warmup_steps, total_steps):
    def lr_lambda(step):
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--zeta", type=int, default=4)
    parser.add_argument("--num-train-epochs", type=int, default=2)
    parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
    args = parser.parse_args()
    print(args)
    seed_everything(0)

    rng = random.Random(0)
    train_queries = generate_dataset(1200, rng)
    eval_queries = generate_dataset(512, rng)
    print(f"Data Examples:\n{train_queries[0]}\nDataset Length:{len(train_queries)}")
    train_loader = DataLoader(TrainDataset(train_queries, 12), batch_size=1, shuffle=True,
                              collate_fn=data_collator)
    eval_loader = DataLoader(TrainDataset(eval_queries, 64), batch_size=1, collate_fn=data_collator)

    reward_model = CausalLMWithValueHead()
    learning_rate = 1e-6
    optimizer = torch.optim.AdamW(reward_model.parameters(), lr=learning_rate, weight_decay=0.0)
    total_steps = len(train_loader) * args.num_train_epochs // args.gradient_accumulation_steps
    scheduler = cosine_with_warmup(optimizer, int(0.1 * total_steps), total_steps)

    global_step, running = 0, 0.0
    for epoch in range(args.num_train_epochs):
        for step, inputs in enumerate(train_loader):
            loss, _ = compute_loss(reward_model, inputs, args.zeta)
            (loss / args.gradient_accumulation_steps).backward()
            running += loss.item() / args.gradient_accumulation_steps
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(reward_model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                global_step += 1
                if global_step % 10 == 0:
                    print(f"{{'loss': {running:.4f}, 'learning_rate': {scheduler.get_last_lr()[0]:.3e}, "
                          f"'epoch': {epoch + (step + 1) / len(train_loader):.2f}, 'step': {global_step}}}")
                running = 0.0
        eval_loss, pair_acc = evaluate(reward_model, eval_loader, args.zeta)
        print(f"epoch {epoch}: eval_loss {eval_loss:.4f} step pair accuracy {pair_acc:.3f}")
