"""Fine-tuning a BERT-style model for multiple choice (SWAG) with accelerate, after
huggingface/transformers examples/pytorch/multiple-choice/run_swag_no_trainer.py.

transformers and datasets are not used: a small BertForMultipleChoice (embeddings with a
LayerNorm, a 2-layer encoder, the tanh pooler on [CLS], a Linear(hidden, 1) scorer whose
outputs are viewed back to (batch, num_choices)) starts from a stand-in "checkpoint" that only
holds word embeddings (loaded with strict=False, as from_pretrained leaves the new head
uninitialised) and is fine-tuned on a synthetic SWAG:
the context and the right ending are drawn from the same topic, the three wrong endings from
other topics. The preprocessing (context repeated four times, flattened, tokenised as pairs,
un-flattened), the multiple-choice collator with dynamic padding, the no-decay parameter groups,
the linear warm-up schedule, accelerator.accumulate with gradient_accumulation_steps and the
evaluation with gather_for_metrics follow the example.
"""
import argparse
import math
import random
from dataclasses import dataclass
from itertools import chain
from typing import Optional

import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader


def parse_args():
    parser = argparse.ArgumentParser(description="Finetune a transformers model on a multiple choice task")
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--per_device_train_batch_size", type=int, default=16)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--num_train_epochs", type=int, default=4)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=2)
    parser.add_argument("--lr_scheduler_type", type=str, default="linear")
    parser.add_argument("--num_warmup_steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args()


# ----------------------------------------------------------------------------- synthetic SWAG
N_TOPICS, WORDS_PER_TOPIC, N_FILLER = 8, 12, 16
PAD, CLS, SEP = 0, 1, 2
FIRST_WORD = 3
VOCAB = FIRST_WORD + N_TOPICS * WORDS_PER_TOPIC + N_FILLER


def topic_words(t):
    return list(range(FIRST_WORD + t * WORDS_PER_TOPIC, FIRST_WORD + (t + 1) * WORDS_PER_TOPIC))


FILLER = list(range(FIRST_WORD + N_TOPICS * WORDS_PER_TOPIC, VOCAB))


def make_swag(n, rng):
    rows = {"sent1": [], "sent2": [], "ending0": [], "ending1": [], "ending2": [], "ending3": [], "label": []}
    for _ in range(n):
        t = rng.randrange(N_TOPICS)
        ctx = rng.choices(topic_words(t), k=rng.randint(4, 7)) + rng.choices(FILLER, k=rng.randint(0, 2))
        rng.shuffle(ctx)
        header = rng.choices(FILLER, k=rng.randint(1, 2))
        others = rng.sample([o for o in range(N_TOPICS) if o != t], 3)
        label = rng.randrange(4)
        endings = []
        for o in others:
            endings.append(rng.choices(topic_words(o), k=rng.randint(2, 4)))
        endings.insert(label, rng.choices(topic_words(t), k=rng.randint(2, 4)))
        rows["sent1"].append(ctx)
        rows["sent2"].append(header)
        for i in range(4):
            rows[f"ending{i}"].append(endings[i])
        rows["label"].append(label)
    return rows


def pretrained_state_dict(hidden_size, seed):
    """Stand-in for from_pretrained: word embeddings in which words of one topic lie close together."""
    g = torch.Generator().manual_seed(seed + 1)
    table = 0.5 * torch.randn(VOCAB, hidden_size, generator=g)
    centroids = torch.randn(N_TOPICS, hidden_size, generator=g)
    for t in range(N_TOPICS):
        table[topic_words(t)] = centroids[t] + 0.5 * torch.randn(WORDS_PER_TOPIC, hidden_size, generator=g)
    table[PAD] = 0
    return {"embeddings.word_embeddings.weight": table}


def tokenizer(first, second, max_length, truncation=True):
    out = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
    for a, b in zip(first, second):
        ids = [CLS] + a + [SEP] + b + [SEP]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        if truncation:
            ids, types = ids[:max_length], types[:max_length]
        out["input_ids"].append(ids)
        out["token_type_ids"].append(types)
        out["attention_mask"].append([1] * len(ids))
    return out


@dataclass
class DataCollatorForMultipleChoice:
    pad_to_multiple_of: Optional[int] = None

    def __call__(self, features):
        label_name = "label" if "label" in features[0].keys() else "labels"
        labels = [feature.pop(label_name) for feature in features]
        batch_size = len(features)
        num_choices = len(features[0]["input_ids"])
        flattened_features = [
            [{k: v[i] for k, v in feature.items()} for i in range(num_choices)] for feature in features
        ]
        flattened_features = list(chain(*flattened_features))

        max_len = max(len(f["input_ids"]) for f in flattened_features)
        if self.pad_to_multiple_of:
            max_len = int(math.ceil(max_len / self.pad_to_multiple_of) * self.pad_to_multiple_of)
        batch = {}
        for k in flattened_features[0].keys():
            batch[k] = torch.tensor([f[k] + [0] * (max_len - len(f[k])) for f in flattened_features])

        # Un-flatten
        batch = {k: v.view(batch_size, num_choices, -1) for k, v in batch.items()}
        # Add back labels
        batch["labels"] = torch.tensor(labels, dtype=torch.int64)
        return batch


# ----------------------------------------------------------------------------- model
@dataclass
class MultipleChoiceModelOutput:
    loss: Optional[torch.Tensor]
    logits: torch.Tensor


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size, dropout):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.size(1), device=input_ids.device).unsqueeze(0)
        emb = self.word_embeddings(input_ids) + self.position_embeddings(positions) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(emb))


class BertForMultipleChoice(nn.Module):
    def __init__(self, vocab_size, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                 max_position_embeddings=64, dropout=0.1):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, 2, dropout)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, intermediate_size, dropout,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, 1)

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None):
        num_choices = input_ids.shape[1]

        input_ids = input_ids.view(-1, input_ids.size(-1))
        attention_mask = attention_mask.view(-1, attention_mask.size(-1))
        token_type_ids = token_type_ids.view(-1, token_type_ids.size(-1))

        hidden = self.embeddings(input_ids, token_type_ids)
        hidden = self.encoder(hidden, src_key_padding_mask=attention_mask == 0)
        pooled_output = self.pooler(hidden[:, 0])

        pooled_output = self.dropout(pooled_output)
        logits = self.classifier(pooled_output)
        reshaped_logits = logits.view(-1, num_choices)

        loss = None
        if labels is not None:
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(reshaped_logits, labels)
        return MultipleChoiceModelOutput(loss=loss, logits=reshaped_logits)


def get_scheduler(name, optimizer, num_warmup_steps, num_training_steps):
    assert name == "linear"

    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda)


# ----------------------------------------------------------------------------- main
def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps, cpu=True)
    set_seed(args.seed)
    torch.set_num_threads(1)

    rng = random.Random(args.seed)
    raw_datasets = {"train": make_swag(1280, rng), "validation": make_swag(320, rng)}

    ending_names = [f"ending{i}" for i in range(4)]
    context_name = "sent1"
    question_header_name = "sent2"
    label_column_name = "label"

    model = BertForMultipleChoice(VOCAB)
    missing, unexpected = model.load_state_dict(pretrained_state_dict(64, args.seed), strict=False)
    accelerator.print(f"Some weights were not initialized from the checkpoint: {len(missing)} tensors "
                      f"(e.g. {missing[-2:]})")

    def preprocess_function(examples):
        first_sentences = [[context] * 4 for context in examples[context_name]]
        question_headers = examples[question_header_name]
        second_sentences = [
            [header + examples[end][i] for end in ending_names] for i, header in enumerate(question_headers)
        ]
        labels = examples[label_column_name]

        # Flatten out
        first_sentences = list(chain(*first_sentences))
        second_sentences = list(chain(*second_sentences))

        # Tokenize
        tokenized_examples = tokenizer(
            first_sentences,
            second_sentences,
            max_length=args.max_seq_length,
            truncation=True,
        )
        # Un-flatten
        tokenized_inputs = {k: [v[i : i + 4] for i in range(0, len(v), 4)] for k, v in tokenized_examples.items()}
        tokenized_inputs["labels"] = labels
        return tokenized_inputs

    with accelerator.main_process_first():
        processed = {split: preprocess_function(ds) for split, ds in raw_datasets.items()}
    train_dataset = [{k: processed["train"][k][i] for k in processed["train"]} for i in range(len(processed["train"]["labels"]))]
    eval_dataset = [{k: processed["validation"][k][i] for k in processed["validation"]} for i in range(len(processed["validation"]["labels"]))]

    for index in random.sample(range(len(train_dataset)), 1):
        accelerator.print(f"Sample {index} of the training set: {train_dataset[index]}.")

    data_collator = DataCollatorForMultipleChoice(pad_to_multiple_of=None)
    train_dataloader = DataLoader(
        train_dataset, shuffle=True, collate_fn=lambda f: data_collator([dict(x) for x in f]),
        batch_size=args.per_device_train_batch_size
    )
    eval_dataloader = DataLoader(eval_dataset, collate_fn=lambda f: data_collator([dict(x) for x in f]),
                                 batch_size=args.per_device_eval_batch_size)

    # Optimizer
    # Split weights in two groups, one with weight decay and the other not.
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": args.weight_decay,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)

    device = accelerator.device
    model.to(device)

    # Scheduler and math around the number of training steps.
    overrode_max_train_steps = False
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
        overrode_max_train_steps = True

    lr_scheduler = get_scheduler(
        name=args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=args.num_warmup_steps * accelerator.num_processes,
        num_training_steps=args.max_train_steps
        if overrode_max_train_steps
        else args.max_train_steps * accelerator.num_processes,
    )

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if overrode_max_train_steps:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)

    total_batch_size = args.per_device_train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    accelerator.print("***** Running training *****")
    accelerator.print(f"  Num examples = {len(train_dataset)}")
    accelerator.print(f"  Num Epochs = {args.num_train_epochs}")
    accelerator.print(f"  Total train batch size (w. parallel, distributed & accumulation) = {total_batch_size}")
    accelerator.print(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
    accelerator.print(f"  Total optimization steps = {args.max_train_steps}")
    completed_steps = 0

    def evaluate():
        model.eval()
        correct, total = 0, 0
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            correct += (predictions == references).sum().item()
            total += references.numel()
        return {"accuracy": correct / total}

    accelerator.print(f"before training: {evaluate()}")
    for epoch in range(0, args.num_train_epochs):
        model.train()
        total_loss = 0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                # We keep track of the loss at each epoch
                total_loss += loss.detach().float()
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            # Checks if the accelerator has performed an optimization step behind the scenes
            if accelerator.sync_gradients:
                completed_steps += 1
                if completed_steps % 10 == 0:
                    accelerator.print(f"  step {completed_steps:4d}  loss {loss.item():.4f}  "
                                      f"lr {lr_scheduler.get_last_lr()[0]:.2e}")

            if completed_steps >= args.max_train_steps:
                break

        eval_metric = evaluate()
        accelerator.print(f"epoch {epoch}: {eval_metric}  train_loss {total_loss.item() / len(train_dataloader):.4f}")


if __name__ == "__main__":
    main()
