"""Representation learning of math questions, after KCQRL's representation_learning module:
a small BERT-style encoder is trained so that the [CLS] embedding of a question (and of each of
its solution steps) lies close to the embeddings of the knowledge concepts (KCs) annotated for it.

The loss is KCQRL's contrastive loss: exp(cosine / T) scores between questions (steps) and the
KCs of the batch, annotated pairs are positives, KCs of the same cluster are removed from the
negatives. The question bank is synthetic: every KC has its own pool of words and a question is
written from the pools of its 1-3 KCs plus filler words.
"""
import random
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

args = SimpleNamespace(
    num_epochs=4,
    batch_size=32,
    lr=5e-4,
    temperature=0.1,
    alpha=0.8,
    patience=3,
    disable_clusters=False,
)

PAD, CLS = 0, 1
VOCAB = 420
N_KC = 72
KC_PER_CLUSTER = 3
WORDS_PER_KC = 5
FILLER = np.arange(2 + N_KC * WORDS_PER_KC, VOCAB)


def kc_words(kc):
    start = 2 + kc * WORDS_PER_KC
    return np.arange(start, start + WORDS_PER_KC)


def kc_cluster(kc):
    return kc // KC_PER_CLUSTER


def make_kc_text(kc, rng):
    words = list(kc_words(kc)) + list(kc_words(kc)[:3])
    rng.shuffle(words)
    return [CLS] + words


def make_question(rng):
    n = rng.integers(1, 4)
    kcs = sorted(rng.choice(N_KC, size=n, replace=False).tolist())
    words = []
    for kc in kcs:
        words += list(rng.choice(kc_words(kc), size=4))
    words += list(rng.choice(FILLER, size=20 - len(words)))
    rng.shuffle(words)
    steps = []
    for kc in kcs:
        step = list(rng.choice(kc_words(kc), size=3)) + list(rng.choice(FILLER, size=5))
        rng.shuffle(step)
        steps.append(([CLS] + step, kc))
    return [CLS] + words, kcs, steps


rng = np.random.default_rng(0)
kc_texts = [make_kc_text(kc, rng) for kc in range(N_KC)]
questions = [make_question(rng) for _ in range(1200)]
train_questions, eval_questions = questions[:1000], questions[1000:]


class QuestionKCDataset(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def pad(seqs):
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    return ids, ids != PAD


def collate(batch):
    batch_kcs = sorted({kc for _, kcs, _ in batch for kc in kcs})
    kc_pos = {kc: i for i, kc in enumerate(batch_kcs)}
    q_ids, q_mask = pad([q for q, _, _ in batch])
    step_texts, kc_quest, kc_step = [], [], []
    for qi, (_, kcs, steps) in enumerate(batch):
        for kc in kcs:
            kc_quest.append((kc_pos[kc], qi))
        for text, kc in steps:
            kc_step.append((kc_pos[kc], len(step_texts)))
            step_texts.append(text)
    s_ids, s_mask = pad(step_texts)
    k_ids, k_mask = pad([kc_texts[kc] for kc in batch_kcs])

    def cluster_pairs(direct):
        pairs = []
        positives = set(direct)
        for k, other in direct:
            for j, kc in enumerate(batch_kcs):
                if kc_cluster(kc) == kc_cluster(batch_kcs[k]) and (j, other) not in positives:
                    pairs.append((j, other))
        return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)

    return {
        'question_ids': q_ids, 'question_mask': q_mask,
        'step_ids': s_ids, 'step_mask': s_mask,
        'kc_ids': k_ids, 'kc_mask': k_mask,
        'kc_quest_pairs': torch.tensor(kc_quest, dtype=torch.long),
        'kc_step_pairs': torch.tensor(kc_step, dtype=torch.long),
        'cluster_kc_quest_pairs': cluster_pairs(kc_quest),
        'cluster_kc_step_pairs': cluster_pairs(kc_step),
    }


class Encoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64, layers=2, heads=4, max_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=128, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids, mask):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.tok(ids) + self.pos(pos)
        h = self.encoder(h, src_key_padding_mask=~mask)
        return SimpleNamespace(last_hidden_state=self.norm(h))


class Evaluator:
    def __init__(self, items):
        self.items = items

    @torch.no_grad()
    def evaluate(self, model):
        model.eval()
        k_ids, k_mask = pad(kc_texts)
        kc_emb = F.normalize(model(k_ids, k_mask).last_hidden_state[:, 0, :], dim=-1)
        q_ids, q_mask = pad([q for q, _, _ in self.items])
        q_emb = F.normalize(model(q_ids, q_mask).last_hidden_state[:, 0, :], dim=-1)
        sim = q_emb @ kc_emb.T
        tp = fp = fn = 0
        for i, (_, kcs, _) in enumerate(self.items):
            pred = set(sim[i].topk(len(kcs)).indices.tolist())
            true = set(kcs)
            tp += len(pred & true)
            fp += len(pred - true)
            fn += len(true - pred)
        model.train()
        return 2 * tp / max(2 * tp + fp + fn, 1)


class Trainer:
    def __init__(self, model, train_dataloader, optimizer, evaluator, args):
        self.model = model
        self.train_dataloader = train_dataloader
        self.optimizer = optimizer
        self.evaluator = evaluator
        self.alpha = args.alpha
        self.num_epochs = args.num_epochs
        self.patience = args.patience
        self.T = args.temperature
        self.disable_clusters = args.disable_clusters
        self.global_step = 0

    def train(self):
        best_micro_f1 = 0
        cur_patience = 0
        for epoch in range(self.num_epochs):
            print(f"Epoch {epoch + 1}/{self.num_epochs}")
            epoch_loss = self.train_epoch()
            print(f"Total Loss: {epoch_loss:.4f}")
            micro_f1 = self.evaluator.evaluate(self.model)
            print(f"Eval Micro F1: {micro_f1:.4f}")
            if micro_f1 > best_micro_f1:
                best_micro_f1 = micro_f1
                cur_patience = 0
            else:
                cur_patience += 1
            if cur_patience >= self.patience:
                print("Stopping training")
                break
        print("Training complete.")

    def train_epoch(self):
        self.model.train()
        total_loss = 0
        for i, batch in enumerate(self.train_dataloader):
            self.optimizer.zero_grad()
            loss = self.process_batch(batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
            self.optimizer.step()
            total_loss += loss.item()
            if self.global_step % 10 == 0:
                print(f"  step {self.global_step:4d}  loss {loss.item():.4f}")
            self.global_step += 1
        return total_loss

    def process_batch(self, batch):
        question_embeddings = self.model(batch['question_ids'], batch['question_mask']).last_hidden_state[:, 0, :]
        step_embeddings = self.model(batch['step_ids'], batch['step_mask']).last_hidden_state[:, 0, :]
        kc_embeddings = self.model(batch['kc_ids'], batch['kc_mask']).last_hidden_state[:, 0, :]

        question_kc_similarity = F.cosine_similarity(question_embeddings.unsqueeze(1), kc_embeddings.unsqueeze(0), dim=2)
        step_kc_similarity = F.cosine_similarity(step_embeddings.unsqueeze(1), kc_embeddings.unsqueeze(0), dim=2)

        question_kc_score = torch.exp(question_kc_similarity / self.T)
        step_kc_score = torch.exp(step_kc_similarity / self.T)

        loss = self.contrastive_loss(question_kc_score, batch['kc_quest_pairs'], batch['cluster_kc_quest_pairs']) + \
            self.alpha * self.contrastive_loss(step_kc_score, batch['kc_step_pairs'], batch['cluster_kc_step_pairs'])
        return loss

    def contrastive_loss(self, score_matrix, direct_pair_indices, clustered_pair_indices):
        pos_mask = torch.zeros_like(score_matrix)
        neg_mask = torch.ones_like(score_matrix)

        pos_mask[direct_pair_indices[:, 1], direct_pair_indices[:, 0]] = 1
        neg_mask[direct_pair_indices[:, 1], direct_pair_indices[:, 0]] = 0

        if not self.disable_clusters:
            neg_mask[clustered_pair_indices[:, 1], clustered_pair_indices[:, 0]] = 0

        pos_score = score_matrix * pos_mask
        neg_score = score_matrix * neg_mask

        pos_score_sum = pos_score.sum(dim=-1)
        neg_score_sum = neg_score.sum(dim=-1)

        scores_sum = pos_score_sum + neg_score_sum
        scores_sum = scores_sum.clamp(min=1e-8)
        pos_score_sum = pos_score_sum.clamp(min=1e-8)

        element_loss = -1 * torch.log(pos_score / scores_sum.unsqueeze(-1))
        element_loss = element_loss * pos_mask

        row_loss = element_loss.sum(dim=-1) / pos_mask.sum(dim=-1).clamp(min=1e-8)
        valid_rows = pos_mask.sum(dim=-1) > 0
        row_loss = row_loss[valid_rows]
        cl_loss = row_loss.mean()
        return cl_loss


def main():
    start = time.time()
    model = Encoder()
    train_loader = DataLoader(QuestionKCDataset(train_questions), batch_size=args.batch_size,
                              shuffle=True, collate_fn=collate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    evaluator = Evaluator(eval_questions)
    print(f"KCs: {N_KC}  train questions: {len(train_questions)}  eval questions: {len(eval_questions)}")
    print(f"Eval Micro F1 before training: {evaluator.evaluate(model):.4f}")
    trainer = Trainer(model, train_loader, optimizer, evaluator, args)
    trainer.train()
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
