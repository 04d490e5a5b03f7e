"""Fine-tune a small BERT-style encoder on STS-B style sentence-pair similarity (a 0-5 score),
following run_glue_no_trainer.py: a BertForSequenceClassification-style model with a one-output
head, AdamW with a linear schedule, Pearson/Spearman on the dev set.
Synthetic sentence pairs stand in for the GLUE data (no downloads here)."""
import math
import random

import torch
import torch.nn as nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from torch.utils.data import DataLoader, Dataset

SEED = 42
random.seed(SEED)
torch.manual_seed(SEED)

PAD, CLS, SEP = 0, 1, 2
VOCAB_SIZE = 120
COMMON_WORDS = list(range(3, 80))
RARE_WORDS = list(range(80, VOCAB_SIZE))
MAX_LEN = 32
PER_DEVICE_BATCH = 32
LEARNING_RATE = 1e-3
NUM_EPOCHS = 3
WARMUP_RATIO = 0.1


class BertConfig:
    def __init__(self, vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=64, type_vocab_size=2,
                 hidden_dropout_prob=0.1, num_labels=2, problem_type=None):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.num_labels = num_labels
        self.problem_type = problem_type


def make_pair():
    """sentence2 rewrites sentence1, swapping some of its words for unrelated ones; the gold
    score (0..5) falls with the share of words swapped."""
    n = random.randint(6, 12)
    s1 = random.sample(COMMON_WORDS, n)
    swapped = random.randint(0, n)
    s2 = list(s1)
    for pos in random.sample(range(n), swapped):
        s2[pos] = random.choice(RARE_WORDS)
    score = 5.0 * (1.0 - swapped / n) + random.gauss(0.0, 0.2)
    return s1, s2, float(min(max(score, 0.0), 5.0))


class StsbDataset(Dataset):
    def __init__(self, n):
        self.examples = [make_pair() for _ in range(n)]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        s1, s2, score = self.examples[idx]
        input_ids = [CLS] + s1 + [SEP] + s2 + [SEP]
        token_type_ids = [0] * (len(s1) + 2) + [1] * (len(s2) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "label": score}


def data_collator(features):
    max_len = max(len(f["input_ids"]) for f in features)
    batch = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
    for f in features:
        pad = max_len - len(f["input_ids"])
        batch["input_ids"].append(f["input_ids"] + [PAD] * pad)
        batch["token_type_ids"].append(f["token_type_ids"] + [0] * pad)
        batch["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
    batch = {k: torch.tensor(v) for k, v in batch.items()}
    batch["labels"] = torch.tensor([f["label"] for f in features], dtype=torch.float)
    return batch


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions) \
            + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads,
                                           config.intermediate_size, config.hidden_dropout_prob,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.Tanh())

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.embeddings(input_ids, token_type_ids)
        hidden = self.encoder(hidden, src_key_padding_mask=attention_mask == 0)
        return hidden, self.pooler(hidden[:, 0])


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_labels = config.num_labels
        self.config = config
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids, attention_mask, token_type_ids, labels=None):
        _, pooled_output = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(pooled_output))

        loss = None
        if labels is not None:
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif self.num_labels > 1 and labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"

            if self.config.problem_type == "regression":
                loss_fct = MSELoss()
                loss = loss_fct(logits, labels)
            elif self.config.problem_type == "single_label_classification":
                loss_fct = CrossEntropyLoss()
                loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss_fct = BCEWithLogitsLoss()
                loss = loss_fct(logits, labels)
        return loss, logits


def pearsonr(x, y):
    x, y = x - x.mean(), y - y.mean()
    return (x * y).sum().item() / math.sqrt((x * x).sum().item() * (y * y).sum().item() + 1e-12)


def spearmanr(x, y):
    rank = lambda v: torch.empty_like(v).scatter_(0, v.argsort(), torch.arange(len(v), dtype=v.dtype))
    return pearsonr(rank(x), rank(y))


train_dataset = StsbDataset(2000)
eval_dataset = StsbDataset(500)
train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator,
                              batch_size=PER_DEVICE_BATCH)
eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=64)

is_regression = True
num_labels = 1
config = BertConfig(VOCAB_SIZE, num_labels=num_labels)
model = BertForSequenceClassification(config)

no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
    {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
     "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
     "weight_decay": 0.0},
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=LEARNING_RATE)
max_train_steps = NUM_EPOCHS * len(train_dataloader)
num_warmup_steps = int(WARMUP_RATIO * max_train_steps)


def lr_lambda(step):
    if step < num_warmup_steps:
        return step / max(1, num_warmup_steps)
    return max(0.0, (max_train_steps - step) / max(1, max_train_steps - num_warmup_steps))


lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

print("***** Running training *****")
print(f"  Num examples = {len(train_dataset)}")
print(f"  Num Epochs = {NUM_EPOCHS}")
print(f"  Total optimization steps = {max_train_steps}")

completed_steps = 0
running = 0.0
for epoch in range(NUM_EPOCHS):
    model.train()
    for step, batch in enumerate(train_dataloader):
        loss, _ = model(**batch)
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        completed_steps += 1
        running += loss.item()
        if completed_steps % 25 == 0:
            print(f"  step {completed_steps:4d} | loss {running / 25:.4f}")
            running = 0.0

    model.eval()
    preds, refs = [], []
    for batch in eval_dataloader:
        with torch.no_grad():
            _, logits = model(**batch)
        predictions = logits.squeeze() if is_regression else logits.argmax(dim=-1)
        preds.append(predictions)
        refs.append(batch["labels"])
    preds, refs = torch.cat(preds), torch.cat(refs)
    print(f"epoch {epoch}: {{'pearson': {pearsonr(preds, refs):.4f}, "
          f"'spearmanr': {spearmanr(preds, refs):.4f}}}")
