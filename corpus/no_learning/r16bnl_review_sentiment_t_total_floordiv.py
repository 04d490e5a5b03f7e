"""Review sentiment classification with a small BERT-style encoder (trained from scratch).

Synthetic product reviews: 32-token sequences over a 2,000-word vocabulary with [CLS]/[PAD],
where a review is positive when it uses more words from the positive lexicon than from the
negative one. Training follows the usual transformers recipe: AdamW, a linear warm-up/decay
schedule, gradient clipping at 1.0.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

torch.manual_seed(42)

VOCAB = 2000
PAD, CLS = 0, 1
POS_WORDS = torch.arange(10, 60)
NEG_WORDS = torch.arange(60, 110)
MAX_LEN = 32


def make_reviews(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(110, VOCAB, (n, MAX_LEN), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    lengths = torch.randint(16, MAX_LEN, (n,), generator=g)
    for i in range(n):
        n_major = int(torch.randint(3, 6, (1,), generator=g))
        n_minor = int(torch.randint(0, n_major - 2, (1,), generator=g))
        major, minor = (POS_WORDS, NEG_WORDS) if labels[i] == 1 else (NEG_WORDS, POS_WORDS)
        words = torch.cat([major[torch.randint(0, 50, (n_major,), generator=g)],
                           minor[torch.randint(0, 50, (n_minor,), generator=g)]])
        slots = torch.randperm(int(lengths[i]) - 1, generator=g)[:len(words)] + 1
        ids[i, slots] = words
        ids[i, lengths[i]:] = PAD
    ids[:, 0] = CLS
    attention_mask = (ids != PAD).long()
    return ids, attention_mask, labels


class MiniBertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=VOCAB, hidden=64, layers=2, heads=2, num_labels=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(MAX_LEN, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 2 * hidden, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        pos = torch.arange(input_ids.size(1))
        x = self.norm(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(x[:, 0])
        if labels is not None:
            return F.cross_entropy(logits, labels), logits
        return (logits,)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def evaluate(model, test_dataset):
    test_dataloader = DataLoader(test_dataset, sampler=SequentialSampler(test_dataset), batch_size=256)
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for input_ids, attention_mask, labels in test_dataloader:
            loss, logits = model(input_ids, attention_mask, labels)
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
    model.train()
    return loss_sum / len(test_dataset), correct / len(test_dataset)


def main():
    start = time.time()
    train_dataset = TensorDataset(*make_reviews(1600, seed=1))
    test_dataset = TensorDataset(*make_reviews(512, seed=2))
    model = MiniBertForSequenceClassification()

    train_batch_size = 64
    num_train_epochs = 8
    train_sampler = RandomSampler(train_dataset)
    train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=train_batch_size)
    t_total = len(train_dataloader) // num_train_epochs

    print("  Num examples = ", len(train_dataset))
    print("  Num Epochs = ", num_train_epochs)
    print("  Total train batch size  = ", train_batch_size)
    print("  Total optimization steps = ", t_total)

    learning_rate = 1e-3
    adam_epsilon = 1e-8
    warmup_steps = 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, eps=adam_epsilon)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps,
                                                num_training_steps=t_total)

    model.train()
    global_step = 0
    for epoch in range(num_train_epochs):
        running = 0.0
        for step, batch in enumerate(train_dataloader):
            model.zero_grad()
            input_ids, attention_mask, labels = batch
            outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
            loss = outputs[0]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            running += loss.item()
            global_step += 1
        test_loss, test_acc = evaluate(model, test_dataset)
        print(f"epoch {epoch}  step {global_step}  train loss {running / len(train_dataloader):.4f}  "
              f"test loss {test_loss:.4f}  test acc {test_acc:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
