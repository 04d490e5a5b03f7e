"""Fine-tune a small BERT-style encoder for sentence classification, run_classifier style.

The "corpus" is generated here: each sentence carries a few cue tokens of its class mixed
with random filler tokens.  The learning rate follows a linear warm-up / linear decay
schedule (the WarmupLinearSchedule from pytorch_pretrained_bert's optimization.py) and is
written into the optimizer's param groups by hand every step, as the fp16 branch of the
example did.
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

random.seed(42)
np.random.seed(42)
torch.manual_seed(42)

VOCAB = 500
MAX_SEQ_LENGTH = 32
NUM_LABELS = 4
CLS_ID, SEP_ID, PAD_ID = 1, 2, 0


class WarmupLinearSchedule(object):
    """Linear warmup over `warmup` fraction of `t_total` steps, then linear decay to 0."""

    def __init__(self, warmup=0.002, t_total=-1):
        self.warmup = warmup
        self.t_total = t_total

    def get_lr(self, step, nowarn=False):
        if self.t_total < 0:
            return 1.0
        progress = float(step) / self.t_total
        ret = self.get_lr_(progress)
        if not nowarn and progress > 1.0:
            print(f"Training beyond specified 't_total'. Learning rate multiplier set to {ret}.")
        return ret

    def get_lr_(self, progress):
        if progress < self.warmup:
            return progress / self.warmup
        return max((progress - 1.0) / (self.warmup - 1.0), 0.0)


def make_examples(n, seed):
    rng = random.Random(seed)
    cues = {c: list(range(10 + 8 * c, 18 + 8 * c)) for c in range(NUM_LABELS)}
    ids, masks, labels = [], [], []
    for _ in range(n):
        label = rng.randrange(NUM_LABELS)
        length = rng.randint(12, MAX_SEQ_LENGTH - 2)
        tokens = [rng.randrange(60, VOCAB) for _ in range(length)]
        for pos in rng.sample(range(length), 3):
            tokens[pos] = rng.choice(cues[label])
        input_ids = [CLS_ID] + tokens + [SEP_ID]
        input_mask = [1] * len(input_ids)
        while len(input_ids) < MAX_SEQ_LENGTH:
            input_ids.append(PAD_ID)
            input_mask.append(0)
        ids.append(input_ids)
        masks.append(input_mask)
        labels.append(label)
    return TensorDataset(torch.tensor(ids), torch.tensor(masks), torch.tensor(labels))


class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size, hidden_size, num_layers, num_heads, num_labels):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD_ID)
        self.position_embeddings = nn.Embedding(MAX_SEQ_LENGTH, hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.layer_norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(self.dropout(pooled))


def accuracy(out, labels):
    return (out.argmax(dim=1) == labels).sum().item()


def main():
    learning_rate = 1e-3
    num_train_epochs = 4
    train_batch_size = 32
    warmup_proportion = 0.1

    train_data = make_examples(1600, seed=1)
    eval_data = make_examples(400, seed=2)
    train_dataloader = DataLoader(train_data, sampler=RandomSampler(train_data), batch_size=train_batch_size)
    eval_dataloader = DataLoader(eval_data, sampler=SequentialSampler(eval_data), batch_size=100)

    num_train_optimization_steps = int(math.ceil(len(train_data) / train_batch_size)) * num_train_epochs

    model = BertForSequenceClassification(VOCAB, 64, 2, 4, NUM_LABELS)
    no_decay = ["bias", "layer_norm", "norm1", "norm2"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=learning_rate)
    warmup_linear = WarmupLinearSchedule(warmup=warmup_proportion, t_total=num_train_optimization_steps)
    loss_fct = nn.CrossEntropyLoss()

    print(f"***** Running training *****  examples {len(train_data)}  steps {num_train_optimization_steps}")
    global_step = 0
    for epoch in range(num_train_epochs):
        model.train()
        tr_loss, nb_tr_steps = 0.0, 0
        for step, (input_ids, input_mask, label_ids) in enumerate(train_dataloader):
            logits = model(input_ids, input_mask)
            loss = loss_fct(logits.view(-1, NUM_LABELS), label_ids.view(-1))
            loss.backward()
            tr_loss += loss.item()
            nb_tr_steps += 1

            lr_this_step = learning_rate * warmup_linear.get_lr(global_step / num_train_optimization_steps,
                                                                warmup_proportion)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr_this_step
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1

        model.eval()
        eval_loss, eval_correct = 0.0, 0
        with torch.no_grad():
            for input_ids, input_mask, label_ids in eval_dataloader:
                logits = model(input_ids, input_mask)
                eval_loss += loss_fct(logits, label_ids).item() * label_ids.size(0)
                eval_correct += accuracy(logits, label_ids)
        print(f"epoch {epoch} global_step {global_step} lr {lr_this_step:.2e} "
              f"train loss {tr_loss / nb_tr_steps:.4f} eval loss {eval_loss / len(eval_data):.4f} "
              f"eval acc {eval_correct / len(eval_data):.3f}")


if __name__ == "__main__":
    main()
