"""Neural Machine Translation by Jointly Learning to Align and Translate (bentrevett/pytorch-seq2seq, tutorial 3).

Bidirectional GRU encoder, additive attention, GRU decoder run step by step over time-major
batches with teacher forcing; the teacher forcing ratio is lowered every epoch (scheduled
sampling) so the decoder learns to continue from its own predictions. A made-up "translation"
task replaces Multi30k: each source word maps to a target word, and the target comes out reversed.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

seed = 1234
random.seed(seed)
np.random.seed(seed)
torch.manual_seed(seed)

PAD, SOS, EOS = 0, 1, 2
SRC_WORDS, TRG_WORDS = 12, 12
SRC_VOCAB, TRG_VOCAB = SRC_WORDS + 3, TRG_WORDS + 3


class ToyTranslationDataset(Dataset):
    def __init__(self, n, rng, lexicon):
        self.pairs = []
        for _ in range(n):
            length = rng.randint(3, 7)
            src = [int(w) for w in rng.randint(3, SRC_VOCAB, size=length)]
            trg = [lexicon[w] for w in reversed(src)]
            self.pairs.append(([SOS] + src + [EOS], [SOS] + trg + [EOS]))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, idx):
        src, trg = self.pairs[idx]
        return torch.tensor(src), torch.tensor(trg)


def get_collate_fn(pad_index):
    def collate_fn(batch):
        batch_src = [example[0] for example in batch]
        batch_trg = [example[1] for example in batch]
        batch_src = nn.utils.rnn.pad_sequence(batch_src, padding_value=pad_index)
        batch_trg = nn.utils.rnn.pad_sequence(batch_trg, padding_value=pad_index)
        return {"src_ids": batch_src, "trg_ids": batch_trg}
    return collate_fn


class Encoder(nn.Module):
    def __init__(self, input_dim, embedding_dim, encoder_hidden_dim, decoder_hidden_dim, dropout):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, embedding_dim)
        self.rnn = nn.GRU(embedding_dim, encoder_hidden_dim, bidirectional=True)
        self.fc = nn.Linear(encoder_hidden_dim * 2, decoder_hidden_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, hidden = self.rnn(embedded)
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, encoder_hidden_dim, decoder_hidden_dim):
        super().__init__()
        self.attn_fc = nn.Linear((encoder_hidden_dim * 2) + decoder_hidden_dim, decoder_hidden_dim)
        self.v_fc = nn.Linear(decoder_hidden_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs):
        batch_size = encoder_outputs.shape[1]
        src_length = encoder_outputs.shape[0]
        hidden = hidden.unsqueeze(1).repeat(1, src_length, 1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        energy = torch.tanh(self.attn_fc(torch.cat((hidden, encoder_outputs), dim=2)))
        attention = self.v_fc(energy).squeeze(2)
        return torch.softmax(attention, dim=1)


class Decoder(nn.Module):
    def __init__(self, output_dim, embedding_dim, encoder_hidden_dim, decoder_hidden_dim, dropout, attention):
        super().__init__()
        self.output_dim = output_dim
        self.attention = attention
        self.embedding = nn.Embedding(output_dim, embedding_dim)
        self.rnn = nn.GRU((encoder_hidden_dim * 2) + embedding_dim, decoder_hidden_dim)
        self.fc_out = nn.Linear((encoder_hidden_dim * 2) + decoder_hidden_dim + embedding_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        a = self.attention(hidden, encoder_outputs)
        a = a.unsqueeze(1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        weighted = torch.bmm(a, encoder_outputs)
        weighted = weighted.permute(1, 0, 2)
        rnn_input = torch.cat((embedded, weighted), dim=2)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        assert (output == hidden).all()
        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)
        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, trg, teacher_forcing_ratio):
        batch_size = src.shape[1]
        trg_length = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_length, batch_size, trg_vocab_size)
        encoder_outputs, hidden = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_length):
            output, hidden, _ = self.decoder(input, hidden, encoder_outputs)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def init_weights(m):
    for name, param in m.named_parameters():
        if "weight" in name:
            nn.init.normal_(param.data, mean=0, std=0.01)
        else:
            nn.init.constant_(param.data, 0)


def train_fn(model, data_loader, optimizer, criterion, clip, teacher_forcing_ratio):
    model.train()
    epoch_loss = 0
    for i, batch in enumerate(data_loader):
        src = batch["src_ids"]
        trg = batch["trg_ids"]
        optimizer.zero_grad()
        output = model(src, trg, teacher_forcing_ratio)
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)
        loss = criterion(output, trg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        epoch_loss += loss.item()
    return epoch_loss / len(data_loader)


def evaluate_fn(model, data_loader, criterion):
    model.eval()
    epoch_loss, seq_correct, n_seq = 0, 0, 0
    with torch.no_grad():
        for i, batch in enumerate(data_loader):
            src = batch["src_ids"]
            trg = batch["trg_ids"]
            output = model(src, trg, 0)
            pred = output[1:].argmax(-1)
            mask = trg[1:] != PAD
            seq_correct += ((pred == trg[1:]) | ~mask).all(0).sum().item()
            n_seq += trg.shape[1]
            output_dim = output.shape[-1]
            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)
            loss = criterion(output, trg)
            epoch_loss += loss.item()
    return epoch_loss / len(data_loader), seq_correct / n_seq


rng = np.random.RandomState(seed)
lexicon = {w: int(t) for w, t in zip(range(3, SRC_VOCAB), rng.permutation(np.arange(3, TRG_VOCAB)))}
train_data = ToyTranslationDataset(1600, rng, lexicon)
valid_data = ToyTranslationDataset(300, rng, lexicon)

batch_size = 64
collate_fn = get_collate_fn(PAD)
train_data_loader = DataLoader(train_data, batch_size=batch_size, collate_fn=collate_fn, shuffle=True)
valid_data_loader = DataLoader(valid_data, batch_size=batch_size, collate_fn=collate_fn)

encoder_embedding_dim = 32
decoder_embedding_dim = 32
encoder_hidden_dim = 64
decoder_hidden_dim = 64
encoder_dropout = 0.2
decoder_dropout = 0.2

attention = Attention(encoder_hidden_dim, decoder_hidden_dim)
encoder = Encoder(SRC_VOCAB, encoder_embedding_dim, encoder_hidden_dim, decoder_hidden_dim, encoder_dropout)
decoder = Decoder(TRG_VOCAB, decoder_embedding_dim, encoder_hidden_dim, decoder_hidden_dim, decoder_dropout, attention)
model = Seq2Seq(encoder, decoder)
model.apply(init_weights)
print(f"The model has {sum(p.numel() for p in model.parameters() if p.requires_grad):,} trainable parameters")

optimizer = optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss(ignore_index=PAD)

n_epochs = 8
clip = 1.0
best_valid_loss = float("inf")
for epoch in range(n_epochs):
    teacher_forcing_ratio = max(0.0, 1.0 - epoch / (n_epochs - 1))
    train_loss = train_fn(model, train_data_loader, optimizer, criterion, clip, teacher_forcing_ratio)
    valid_loss, valid_acc = evaluate_fn(model, valid_data_loader, criterion)
    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
    print(f"Epoch {epoch} | teacher forcing {teacher_forcing_ratio:.2f}")
    print(f"\tTrain Loss: {train_loss:7.3f} | Train PPL: {np.exp(train_loss):7.3f}")
    print(f"\tValid Loss: {valid_loss:7.3f} | Valid PPL: {np.exp(valid_loss):7.3f} | Valid exact match: {valid_acc:.3f}")
