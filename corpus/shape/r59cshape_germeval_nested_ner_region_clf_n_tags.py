# coding: utf-8
"""Boundary-aware nested NER on GermEval-2014 style data (outer + inner entity columns, iob2):
a BiLSTM over word embeddings labels entity heads/tails, every head..tail candidate region is
classified into an entity type; multitask loss gamma * region + (1 - gamma) * boundary.
"""
import os
import random
import tempfile
from datetime import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, DataLoader

RANDOM_SEED = 233
random.seed(RANDOM_SEED)
np.random.seed(RANDOM_SEED)
torch.manual_seed(RANDOM_SEED)

EARLY_STOP = 5
LR = 0.002
BATCH_SIZE = 32
MAX_GRAD_NORM = 5
N_TAGS = 12
LOG_PER_BATCH = 10

DATA_DIR = tempfile.mkdtemp(prefix="germ_")
TRAIN_URL = os.path.join(DATA_DIR, "germ.train.iob2")
DEV_URL = os.path.join(DATA_DIR, "germ.dev.iob2")

LABEL_IDS = {"neither": 0, "PER": 1, "PERderiv": 2, "PERpart": 3, "LOC": 4, "LOCderiv": 5, "LOCpart": 6,
             "ORG": 7, "ORGderiv": 8, "ORGpart": 9, "OTH": 10, "OTHderiv": 11, "OTHpart": 12}


# ------------------------------------------------------------------ synthetic GermEval files
LEX = {
    "PER": [["Angela", "Merkel"], ["Thomas", "Müller"], ["Helmut", "Kohl"], ["Johann", "Wolfgang", "Goethe"],
            ["Sabine", "Weber"], ["Klaus", "Wowereit"], ["Heidi", "Klum"], ["Jürgen", "Klopp"]],
    "PERderiv": [["merkelsche"], ["goethesche"], ["kohlschen"], ["brechtsche"]],
    "PERpart": [["Merkel-Regierung"], ["Goethe-Gedichte"], ["Klopp-Elf"], ["Kohl-Ära"]],
    "LOC": [["Berlin"], ["Hamburg"], ["Bayern"], ["Köln"], ["Deutschland"], ["Bonn"], ["Frankfurt"], ["Sachsen"]],
    "LOCderiv": [["deutschen"], ["bayerische"], ["Berliner"], ["europäischen"], ["sächsische"]],
    "LOCpart": [["Nordseeküste"], ["Deutschlandtour"], ["Rheinufer"], ["Ostdeutschland"]],
    "ORG": [["SPD"], ["Bundestag"], ["Siemens"], ["Bundeswehr"], ["ARD"], ["Greenpeace"]],
    "ORGderiv": [["sozialdemokratische"], ["christdemokratischen"], ["grüne"]],
    "ORGpart": [["SPD-Vorsitzende"], ["EU-Kommission"], ["Siemens-Aktie"], ["ARD-Sendung"]],
    "OTH": [["Tatort"], ["Faust"], ["Windows"], ["Bundesliga"], ["Spiegel"]],
    "OTHderiv": [["faustische"], ["tatortreife"]],
    "OTHpart": [["Tatort-Kommissar"], ["Faust-Inszenierung"], ["Windows-Version"]],
}
NESTED_ORG = [  # outer ORG with an inner entity
    (["Universität", "Bonn"], 1, "LOC"), (["FC", "Bayern", "München"], 1, "LOC"),
    (["Deutsche", "Bahn"], 0, "LOCderiv"), (["Berliner", "Senat"], 0, "LOCderiv"),
    (["Stadtwerke", "Köln"], 1, "LOC"), (["Goethe", "Institut"], 0, "PER"),
]
FILLER = ("der die das und in im am mit von für auf nach bei über hat ist sind wurde werden sagte "
          "heute gestern Montag Woche Jahr Stadt Regierung Spiel Bericht Zeitung Menschen Kritik neue "
          "ersten großen gegen seit beim dem den des ein eine einen vor zum zur nicht auch noch Prozent "
          "Millionen Euro Sieg Wahl Streit Plan Saison Abend Ende").split()
COMMON_TYPES = ["PER", "LOC", "ORG", "LOC", "PER", "LOCderiv", "ORGpart", "OTH", "PERpart", "LOCpart",
                "ORGderiv", "PERderiv", "OTHderiv"]


def make_sentence(rng, allow_rare):
    tokens, outer, inner = [], [], []

    def filler(n):
        for _ in range(n):
            tokens.append(FILLER[rng.randrange(len(FILLER))])
            outer.append("O")
            inner.append("O")

    filler(rng.randint(1, 4))
    n_ent = rng.randint(1, 2)
    for k in range(n_ent):
        if rng.random() < 0.2 and not (allow_rare and k == 0):
            words, pos, itype = NESTED_ORG[rng.randrange(len(NESTED_ORG))]
            for j, w in enumerate(words):
                tokens.append(w)
                outer.append(("B-" if j == 0 else "I-") + "ORG")
                inner.append("B-" + itype if j == pos else "O")
        else:
            etype = "OTHpart" if (allow_rare and k == 0) else COMMON_TYPES[rng.randrange(len(COMMON_TYPES))]
            words = LEX[etype][rng.randrange(len(LEX[etype]))]
            for j, w in enumerate(words):
                tokens.append(w)
                outer.append(("B-" if j == 0 else "I-") + etype)
                inner.append("O")
        filler(rng.randint(1, 5))
    tokens.append(".")
    outer.append("O")
    inner.append("O")
    return tokens, outer, inner


def write_germeval(path, n_sentences, rare_at, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_sentences):
            tokens, outer, inner = make_sentence(rng, allow_rare=i in rare_at)
            for t, o, n in zip(tokens, outer, inner):
                f.write(f"{t}\t{o}\t{n}\n")
            f.write("\n")


# ------------------------------------------------------------------ dataset
def infer_records(columns):
    records = dict()
    for col in columns:
        start = 0
        while start < len(col):
            end = start + 1
            if col[start][0] == 'B':
                while end < len(col) and col[end][0] == 'I':
                    end += 1
                records[(start, end)] = col[start][2:]
            start = end
    return records


def load_raw_data(data_url):
    sentences, records = list(), list()
    with open(data_url, 'r', encoding='utf-8') as iob_file:
        columns = None
        for line in iob_file:
            if line != '\n':
                values = line.split()
                if columns is None:
                    columns = [list() for _ in values]
                for i, v in enumerate(values):
                    columns[i].append(v)
            else:
                sentences.append(columns[0])
                records.append(infer_records(columns[1:]))
                columns = None
    return sentences, records


def gen_vocab_from_data(data_urls):
    vocab = set()
    for data_url in data_urls:
        for sent in load_raw_data(data_url)[0]:
            vocab.update(sent)
    vocab = ['<pad>', '<unk>'] + sorted(vocab)
    return {w: i for i, w in enumerate(vocab)}


class End2EndDataset(Dataset):
    def __init__(self, data_url, vocab, evaluating=False):
        super().__init__()
        self.label_ids = LABEL_IDS
        self.vocab = vocab
        self.sentences, self.records = load_raw_data(data_url)
        self.evaluating = evaluating

    def __getitem__(self, index):
        return self.sentences[index], self.records[index]

    def __len__(self):
        return len(self.sentences)

    def collate_func(self, data_list):
        data_list = sorted(data_list, key=lambda tup: len(tup[0]), reverse=True)
        sentence_list, records_list = zip(*data_list)
        sentence_tensors = gen_sentence_tensors(sentence_list, self.vocab)

        max_sent_len = sentence_tensors[1][0]
        sentence_labels = list()
        region_labels = list()
        for records, length in zip(records_list, sentence_tensors[1]):
            labels = [0] * max_sent_len
            for record in records:
                for i in range(record[0] + 1, record[1] - 1):
                    if labels[i] == 1 or labels[i] == 2:
                        continue
                    labels[i] = 3
                labels[record[1] - 1] = 2
                labels[record[0]] = 1
            sentence_labels.append(labels)

            for start in range(0, length):
                if labels[start] == 1:
                    region_labels.append(self.label_ids[records[(start, start + 1)]] if (start, start + 1) in records else 0)
                    for end in range(start + 1, length):
                        if labels[end] == 2:
                            region_labels.append(self.label_ids[records[(start, end + 1)]] if (start, end + 1) in records else 0)

        sentence_labels = torch.LongTensor(sentence_labels)
        region_labels = torch.LongTensor(region_labels)
        if self.evaluating:
            return sentence_tensors, sentence_labels, region_labels, records_list
        return sentence_tensors, sentence_labels, region_labels


def gen_sentence_tensors(sentence_list, vocab):
    unk_idx = 1
    sentences = [torch.LongTensor([vocab.get(word, unk_idx) for word in sent]) for sent in sentence_list]
    sentence_lengths = [len(sentence) for sentence in sentences]
    sentences = pad_sequence(sentences, batch_first=True)
    return sentences, sentence_lengths


# ------------------------------------------------------------------ model
class CatRepr(nn.Module):
    def forward(self, data_list):
        cat_regions = [torch.mean(hidden, dim=0).view(1, -1) for hidden in data_list]
        return torch.cat(cat_regions, dim=0)


class RegionCLF(nn.Module):
    def __init__(self, input_dim, n_classes):
        super().__init__()
        self.region_repr = CatRepr()
        self.fc = nn.Sequential(nn.ReLU(), nn.Linear(input_dim, n_classes))

    def forward(self, data_list):
        return self.fc(self.region_repr(data_list))


class End2EndModel(nn.Module):
    def __init__(self, hidden_size, n_tags, n_embeddings, embedding_dim, bidirectional=True, lstm_layers=1):
        super().__init__()
        self.embedding = nn.Embedding(n_embeddings, embedding_dim, padding_idx=0)
        self.dropout = nn.Dropout(p=0.5)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, bidirectional=bidirectional,
                            num_layers=lstm_layers, batch_first=True)
        self.n_hidden = (1 + bidirectional) * hidden_size
        self.region_clf = RegionCLF(input_dim=self.n_hidden, n_classes=n_tags)
        self.ht_labeler = nn.Sequential(nn.ReLU(), nn.Linear(self.n_hidden, 4))

    def forward(self, sentences, sentence_lengths, sentence_labels=None):
        word_repr = self.embedding(sentences)
        word_repr = self.dropout(word_repr)

        packed = nn.utils.rnn.pack_padded_sequence(word_repr, sentence_lengths, batch_first=True)
        out, _ = self.lstm(packed)
        max_sent_len = sentences.shape[1]
        unpacked, _ = nn.utils.rnn.pad_packed_sequence(out, total_length=max_sent_len, batch_first=True)

        sentence_outputs = self.ht_labeler(unpacked).transpose(1, 2)
        # (batch_size, 4, max_sent_len)

        if sentence_labels is None:
            sentence_labels = torch.argmax(sentence_outputs, dim=1)

        regions = list()
        for hidden, sentence_label, length in zip(unpacked, sentence_labels.tolist(), sentence_lengths):
            for start in range(0, length):
                if sentence_label[start] == 1:
                    regions.append(hidden[start:start + 1])
                    for end in range(start + 1, length):
                        if sentence_label[end] == 2:
                            regions.append(hidden[start:end + 1])

        region_outputs = self.region_clf(regions) if regions else unpacked.new_zeros(0, N_TAGS)
        return region_outputs, sentence_outputs


# ------------------------------------------------------------------ eval / train
def evaluate_e2e(model, dataset):
    loader = DataLoader(dataset, batch_size=200, collate_fn=dataset.collate_func)
    model.eval()
    tp = n_pred = n_true = 0
    with torch.no_grad():
        for data, sentence_labels, region_labels, records_list in loader:
            pred_region_output, pred_sentence_output = model.forward(*data)
            pred_sentence_labels = torch.argmax(pred_sentence_output, dim=1)
            pred_region_labels = torch.argmax(pred_region_output, dim=1).view(-1).tolist()
            ind = 0
            for sent_labels, length, true_records in zip(pred_sentence_labels.tolist(), data[1], records_list):
                pred_records = dict()
                for start in range(0, length):
                    if sent_labels[start] == 1:
                        if pred_region_labels[ind] > 0:
                            pred_records[(start, start + 1)] = int(pred_region_labels[ind])
                        ind += 1
                        for end in range(start + 1, length):
                            if sent_labels[end] == 2:
                                if pred_region_labels[ind] > 0:
                                    pred_records[(start, end + 1)] = int(pred_region_labels[ind])
                                ind += 1
                n_true += len(true_records)
                n_pred += len(pred_records)
                tp += sum(1 for r, lab in pred_records.items()
                          if r in true_records and dataset.label_ids[true_records[r]] == lab)
    model.train()
    precision = tp / max(n_pred, 1)
    recall = tp / max(n_true, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-9)
    return {'precision': precision, 'recall': recall, 'f1': f1}


def train_end2end(n_epochs=3, learning_rate=LR, batch_size=BATCH_SIZE, clip_norm=MAX_GRAD_NORM, gamma=0.3):
    start_time = datetime.now()
    vocab = gen_vocab_from_data([TRAIN_URL, DEV_URL])
    train_set = End2EndDataset(TRAIN_URL, vocab)
    dev_set = End2EndDataset(DEV_URL, vocab, evaluating=True)
    train_loader = DataLoader(train_set, batch_size=batch_size, drop_last=False,
                              collate_fn=train_set.collate_func)
    print("train sentences:", len(train_set), "dev sentences:", len(dev_set), "vocab:", len(vocab))

    model = End2EndModel(hidden_size=100, n_tags=N_TAGS, n_embeddings=len(vocab), embedding_dim=100)
    criterion = F.cross_entropy
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    cnt = 0
    max_f1, max_f1_epoch = 0, 0
    for epoch in range(n_epochs):
        model.train()
        batch_id = 0
        for data, sentence_labels, region_labels in train_loader:
            optimizer.zero_grad()
            pred_region_labels, pred_sentence_labels = model.forward(*data, sentence_labels)
            classification_loss = criterion(pred_region_labels, region_labels)
            bsl_loss = criterion(pred_sentence_labels, sentence_labels)
            loss = gamma * classification_loss + (1 - gamma) * bsl_loss
            loss.backward()
            if clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip_norm)
            optimizer.step()
            if batch_id % LOG_PER_BATCH == 0:
                print("epoch #%d, batch #%d, loss: %.6f (region %.4f, boundary %.4f)" %
                      (epoch, batch_id, loss.item(), classification_loss.item(), bsl_loss.item()))
            batch_id += 1

        cnt += 1
        precision, recall, f1 = evaluate_e2e(model, dev_set).values()
        print("dev precision %.4f recall %.4f f1 %.4f" % (precision, recall, f1))
        if f1 > max_f1:
            max_f1, max_f1_epoch = f1, epoch
            cnt = 0
        print("maximum of f1 value: %.6f, in epoch #%d" % (max_f1, max_f1_epoch))
        print("training time:", str(datetime.now() - start_time).split('.')[0])
        if cnt >= EARLY_STOP > 0:
            break


def main():
    write_germeval(TRAIN_URL, 2400, rare_at={2215, 2290, 2371}, seed=1)
    write_germeval(DEV_URL, 300, rare_at={140}, seed=2)
    train_end2end()


if __name__ == '__main__':
    main()
