"""Fine-tune a small BERT-style encoder for cross-lingual intent classification
(label<TAB>utterance files), as the first stage before building the text graph."""
import os
import time
import random
import tempfile
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader, RandomSampler, SequentialSampler

INTENTS = ["flight", "airfare", "ground_service", "airline", "abbreviation", "aircraft",
           "flight_time", "quantity", "distance", "city", "airport", "capacity",
           "ground_fare", "meal", "restriction", "cheapest", "day_name", "flight_no"]
FILLER = "please i want to know the show me what is for from to on a about tell".split()
CITIES = "boston denver dallas atlanta pittsburgh baltimore seattle miami".split()


def write_corpus(path, n_train=720, n_test=240, seed=7):
    rng = random.Random(seed)
    os.makedirs(path, exist_ok=True)
    for name, n in [("train.txt", n_train), ("test.txt", n_test)]:
        with open(os.path.join(path, name), "w", encoding="UTF-8") as fout:
            for _ in range(n):
                label = rng.randrange(len(INTENTS))
                words = rng.sample(FILLER, 4) + INTENTS[label].split("_") + rng.sample(CITIES, 2)
                rng.shuffle(words)
                fout.write(f"{label}\t{' '.join(words)} {rng.randrange(10**6)}\n")


class WordTokenizer:
    def __init__(self, sentences):
        self.vocab = {"[PAD]": 0, "[CLS]": 1, "[UNK]": 2}
        for s in sentences:
            for w in s.split():
                self.vocab.setdefault(w, len(self.vocab))

    def batch_encode_plus(self, sentences, max_length=16):
        ids = torch.zeros(len(sentences), max_length, dtype=torch.long)
        mask = torch.zeros(len(sentences), max_length, dtype=torch.long)
        for i, s in enumerate(sentences):
            toks = [1] + [self.vocab.get(w, 2) for w in s.split()][:max_length - 1]
            ids[i, :len(toks)] = torch.tensor(toks)
            mask[i, :len(toks)] = 1
        return {"input_ids": ids, "attention_mask": mask}


class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size, num_labels, hidden=64, layers=2, heads=4, max_length=16,
                 hidden_dropout_prob=0.15):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_length, hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, hidden_dropout_prob,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        self.dropout = nn.Dropout(hidden_dropout_prob)
        self.classifier = nn.Linear(hidden, num_labels)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, input_ids, attention_mask, labels=None):
        pos = torch.arange(input_ids.size(1)).unsqueeze(0)
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos)
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(self.dropout(self.pooler(h[:, 0])))
        loss = self.loss_fct(logits, labels) if labels is not None else None
        return loss, logits


def num_correct(preds, labels):
    return np.sum(np.argmax(preds, axis=1).flatten() == labels.flatten())


def finetune_mode(file_path, batch_size=32, num_labels=12, lr=1e-3, epochs=4, max_length=16):
    def read_lines(file_name):
        data, labels = [], []
        with open(file_name, "r", encoding="UTF-8") as fin:
            for line in fin:
                seg = line.rstrip().split("\t")
                data.append(seg[1])
                labels.append(int(seg[0]))
        return data, labels

    train_text, train_labels = read_lines(os.path.join(file_path, "train.txt"))
    val_text, val_labels = read_lines(os.path.join(file_path, "test.txt"))
    tokenizer = WordTokenizer(train_text)

    def make_dataset(text, labels):
        enc = tokenizer.batch_encode_plus(text, max_length=max_length)
        return TensorDataset(enc["input_ids"], enc["attention_mask"], torch.LongTensor(labels))

    train_dataset = make_dataset(train_text, train_labels)
    val_dataset = make_dataset(val_text, val_labels)
    print("{:>5,} training samples".format(len(train_dataset)))
    print("{:>5,} validation samples".format(len(val_dataset)))

    train_dataloader = DataLoader(train_dataset, sampler=RandomSampler(train_dataset),
                                  batch_size=batch_size)
    validation_dataloader = DataLoader(val_dataset, sampler=SequentialSampler(val_dataset),
                                       batch_size=batch_size)

    model = BertForSequenceClassification(len(tokenizer.vocab), num_labels=num_labels,
                                          max_length=max_length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, eps=1e-8)
    total_steps = len(train_dataloader) * epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, (total_steps - step) / total_steps))

    for epoch_i in range(epochs):
        print(f"======== Epoch {epoch_i + 1} / {epochs} ========")
        t0 = time.time()
        total_train_loss = 0
        model.train()
        for step, batch in enumerate(train_dataloader):
            b_input_ids, b_input_mask, b_labels = batch
            model.zero_grad()
            loss, logits = model(b_input_ids, attention_mask=b_input_mask, labels=b_labels)
            total_train_loss += loss.item()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        print("  Average training loss: {0:.2f}".format(total_train_loss / len(train_dataloader)))

        model.eval()
        total_eval_correct = 0
        total_eval_loss = 0
        for batch in validation_dataloader:
            b_input_ids, b_input_mask, b_labels = batch
            with torch.no_grad():
                loss, logits = model(b_input_ids, attention_mask=b_input_mask, labels=b_labels)
            total_eval_loss += loss.item()
            total_eval_correct += num_correct(logits.numpy(), b_labels.numpy())
        print("  Accuracy: {0:.4f}".format(total_eval_correct / len(val_dataset)))
        print("  Validation Loss: {0:.2f}  ({1:.1f}s)".format(
            total_eval_loss / len(validation_dataloader), time.time() - t0))
    return tokenizer, model


if __name__ == "__main__":
    random.seed(42)
    np.random.seed(42)
    torch.manual_seed(42)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = os.path.join(tmp, "mtop_en")
        write_corpus(data_dir)
        tokenizer, model = finetune_mode(data_dir)
    print("Training complete!")
