"""Seq2seq dialogue model in the style of ParlAI's early seq2seq agent, trained on an
Ubuntu-dialogue-like corpus: a GRU encoder reads the user's turn, a GRU decoder (initialised
with the encoder state, teacher forcing) produces the helper's reply, and the output layer
scores the whole vocabulary at every reply position.

The synthetic corpus imitates #ubuntu chat turns: a question built from a few topic words and
a reply that answers with the matching command words, with chatter around them; as in the
real logs, a few replies contain pasted terminal output.
"""
import random
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

random.seed(13)
torch.manual_seed(13)

opt = {
    "batchsize": 8,
    "hiddensize": 128,
    "embeddingsize": 64,
    "numlayers": 1,
    "learningrate": 0.002,
    "num_epochs": 1,
    "truncate": -1,
    "dict_maxtokens": 6000,
    "log_every_n_steps": 10,
}

PAD, START, END, UNK = 0, 1, 2, 3


def make_ubuntu_like_corpus(n_dialogs=1200, vocab=6000, n_pastes=2):
    topic_words = list(range(10, 400))
    answer_offset = 400
    data = []
    for _ in range(n_dialogs):
        topic = random.sample(topic_words, random.randint(2, 5))
        filler = [random.randint(1000, vocab - 1) for _ in range(random.randint(4, 20))]
        text = filler[: len(filler) // 2] + topic + filler[len(filler) // 2:]
        reply = [t + answer_offset for t in topic] + [random.randint(1000, vocab - 1) for _ in range(random.randint(2, 12))]
        data.append((text, reply))
    for i in random.sample(range(n_dialogs), n_pastes):
        text, reply = data[i]
        paste = [random.randint(1000, vocab - 1) for _ in range(random.randint(1100, 1300))]
        data[i] = (text, reply[:3] + paste)
    return data


class DialogTeacher(Dataset):
    def __init__(self, episodes):
        self.episodes = episodes

    def __len__(self):
        return len(self.episodes)

    def __getitem__(self, idx):
        return self.episodes[idx]


def batchify(observations):
    texts, labels = [], []
    for text, label in observations:
        if opt["truncate"] > 0:
            text = text[-opt["truncate"]:]
            label = label[:opt["truncate"]]
        texts.append(torch.tensor(text))
        labels.append(torch.tensor([START] + label + [END]))
    xs = nn.utils.rnn.pad_sequence(texts, batch_first=True, padding_value=PAD)
    ys = nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=PAD)
    return xs, ys


class Seq2seq(nn.Module):
    def __init__(self, vocab_size, emb, hidden, numlayers):
        super().__init__()
        self.lt = nn.Embedding(vocab_size, emb, padding_idx=PAD)
        self.encoder = nn.GRU(emb, hidden, numlayers, batch_first=True)
        self.decoder = nn.GRU(emb, hidden, numlayers, batch_first=True)
        self.h2o = nn.Linear(hidden, vocab_size)

    def forward(self, xs, ys_in):
        _, hidden = self.encoder(self.lt(xs))
        dec_out, _ = self.decoder(self.lt(ys_in), hidden)
        return self.h2o(dec_out)


def main():
    corpus = make_ubuntu_like_corpus(vocab=opt["dict_maxtokens"])
    loader = DataLoader(DialogTeacher(corpus), batch_size=opt["batchsize"], shuffle=True, collate_fn=batchify)
    model = Seq2seq(opt["dict_maxtokens"], opt["embeddingsize"], opt["hiddensize"], opt["numlayers"])
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    optimizer = torch.optim.Adam(model.parameters(), lr=opt["learningrate"])
    print(f"[ training seq2seq on {len(corpus)} episodes, batchsize {opt['batchsize']}, "
          f"vocab {opt['dict_maxtokens']}, truncate {opt['truncate']} ]")

    start = time.time()
    step = 0
    for epoch in range(opt["num_epochs"]):
        model.train()
        running, n_tokens = 0.0, 0
        for xs, ys in loader:
            optimizer.zero_grad()
            scores = model(xs, ys[:, :-1])
            loss = criterion(scores.reshape(-1, scores.size(-1)), ys[:, 1:].reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            step += 1
            running += loss.item()
            n_tokens += int((ys[:, 1:] != PAD).sum())
            if step % opt["log_every_n_steps"] == 0:
                print(f"[ time:{time.time() - start:.1f}s epoch:{epoch} exs:{step * opt['batchsize']} "
                      f"loss:{running / opt['log_every_n_steps']:.3f} ppl:{torch.exp(torch.tensor(running / opt['log_every_n_steps'])):.1f} "
                      f"tokens:{n_tokens} ]")
                running, n_tokens = 0.0, 0
    print("[ training done ]")


if __name__ == "__main__":
    main()
