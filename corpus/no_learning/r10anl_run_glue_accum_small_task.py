"""Fine-tuning a small BERT-style encoder on a GLUE-like sentence classification task.

Follows the structure of the transformers `run_glue.py` example (argparse, features turned
into a DataLoader, gradient accumulation, linear warm-up schedule, evaluation after every
epoch).  The task is a small synthetic sentiment set: a "positive" sentence contains one to
three cue words from the positive word list, a "negative" one cue words from the negative list.
"""
import argparse
import logging
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

logger = logging.getLogger(__name__)

PAD, CLS = 0, 1
POSITIVE = list(range(10, 20))
NEGATIVE = list(range(20, 30))


def set_seed(args):
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)


def make_examples(n, vocab_size, max_len, seed):
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(n):
        length = int(rng.integers(8, max_len - 1))
        tokens = rng.integers(30, vocab_size, size=length)
        label = int(rng.integers(0, 2))
        cue_words = POSITIVE if label == 1 else NEGATIVE
        n_cues = int(rng.integers(1, 4))
        slots = rng.choice(length, size=n_cues, replace=False)
        tokens[slots] = rng.choice(cue_words, size=n_cues)
        examples.append({"tokens": [CLS] + tokens.tolist(), "label": label})
    return examples


class GlueDataset(Dataset):
    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def collate_fn(features):
    max_len = max(len(f["tokens"]) for f in features)
    input_ids = torch.full((len(features), max_len), PAD, dtype=torch.long)
    attention_mask = torch.zeros((len(features), max_len), dtype=torch.long)
    for i, f in enumerate(features):
        input_ids[i, :len(f["tokens"])] = torch.tensor(f["tokens"])
        attention_mask[i, :len(f["tokens"])] = 1
    labels = torch.tensor([f["label"] for f in features])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size, hidden_size=32, num_layers=1, num_heads=4, max_len=64, num_labels=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(max_len, hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.layer_norm(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(self.dropout(self.pooler(h[:, 0])))
        outputs = (logits,)
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels)
            outputs = (loss,) + outputs
        return outputs


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def evaluate(args, model, eval_dataset):
    eval_dataloader = DataLoader(eval_dataset, sampler=SequentialSampler(eval_dataset),
                                 batch_size=args.per_gpu_eval_batch_size, collate_fn=collate_fn)
    model.eval()
    eval_loss, preds, out_label_ids = 0.0, [], []
    with torch.no_grad():
        for batch in eval_dataloader:
            tmp_eval_loss, logits = model(**batch)
            eval_loss += tmp_eval_loss.item()
            preds.append(logits.argmax(-1))
            out_label_ids.append(batch["labels"])
    preds, out_label_ids = torch.cat(preds), torch.cat(out_label_ids)
    return {"loss": eval_loss / len(eval_dataloader), "acc": (preds == out_label_ids).float().mean().item()}


def train(args, train_dataset, eval_dataset, model):
    train_dataloader = DataLoader(train_dataset, sampler=RandomSampler(train_dataset),
                                  batch_size=args.per_gpu_train_batch_size, collate_fn=collate_fn)
    t_total = len(train_dataloader) * args.num_train_epochs // args.gradient_accumulation_steps

    no_decay = ["bias", "LayerNorm.weight", "layer_norm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate, eps=args.adam_epsilon)
    scheduler = get_linear_schedule_with_warmup(optimizer, args.warmup_steps, t_total)

    logger.info("***** Running training *****")
    logger.info("  Num examples = %d", len(train_dataset))
    logger.info("  Num Epochs = %d", args.num_train_epochs)
    logger.info("  Gradient Accumulation steps = %d", args.gradient_accumulation_steps)
    logger.info("  Total optimization steps = %d", t_total)

    global_step = 0
    tr_loss, logging_loss = 0.0, 0.0
    model.zero_grad()
    set_seed(args)
    for epoch in range(args.num_train_epochs):
        for step, batch in enumerate(train_dataloader):
            model.train()
            outputs = model(**batch)
            loss = outputs[0]
            if args.gradient_accumulation_steps > 1:
                loss = loss / args.gradient_accumulation_steps
            loss.backward()
            tr_loss += loss.item()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                global_step += 1
        results = evaluate(args, model, eval_dataset)
        logger.info("epoch %d | train loss %.4f | eval loss %.4f | eval acc %.3f | global_step %d",
                    epoch, (tr_loss - logging_loss) * args.gradient_accumulation_steps / len(train_dataloader),
                    results["loss"], results["acc"], global_step)
        logging_loss = tr_loss
    return global_step, tr_loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task_name", default="rte-synthetic", type=str)
    parser.add_argument("--max_seq_length", default=24, type=int)
    parser.add_argument("--vocab_size", default=500, type=int)
    parser.add_argument("--num_train_examples", default=240, type=int)
    parser.add_argument("--per_gpu_train_batch_size", default=16, type=int)
    parser.add_argument("--per_gpu_eval_batch_size", default=64, type=int)
    parser.add_argument("--gradient_accumulation_steps", default=16, type=int)
    parser.add_argument("--learning_rate", default=3e-3, type=float)
    parser.add_argument("--weight_decay", default=0.0, type=float)
    parser.add_argument("--adam_epsilon", default=1e-8, type=float)
    parser.add_argument("--max_grad_norm", default=1.0, type=float)
    parser.add_argument("--num_train_epochs", default=30, type=int)
    parser.add_argument("--warmup_steps", default=0, type=int)
    parser.add_argument("--seed", default=42, type=int)
    args = parser.parse_args()

    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    set_seed(args)

    train_dataset = GlueDataset(make_examples(args.num_train_examples, args.vocab_size, args.max_seq_length, seed=1))
    eval_dataset = GlueDataset(make_examples(256, args.vocab_size, args.max_seq_length, seed=2))
    model = BertForSequenceClassification(args.vocab_size, max_len=args.max_seq_length)

    global_step, tr_loss = train(args, train_dataset, eval_dataset, model)
    logger.info(" global_step = %s, average loss = %s", global_step, tr_loss / max(1, global_step))


if __name__ == "__main__":
    main()
