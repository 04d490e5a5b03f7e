"""Seq2seq chatbot (PyTorch chatbot tutorial) on a synthetic query -> response corpus.

Bidirectional GRU encoder, Luong "dot" attention decoder decoded one step at a time with
teacher forcing, maskNLLLoss over the padded target batch, gradient clipping at 50 and a
decoder learning rate 5x the encoder's.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

PAD_token, SOS_token, EOS_token = 0, 1, 2
VOCAB = 40
MAX_LENGTH = 10


def make_pairs(n, rng):
    pairs = []
    for _ in range(n):
        length = rng.randint(3, MAX_LENGTH - 1)
        query = [rng.randint(3, VOCAB - 1) for _ in range(length)]
        response = [3 + (VOCAB - 1 - w) for w in reversed(query)]
        pairs.append((query, response))
    return pairs


def zeroPadding(seqs, fillvalue=PAD_token):
    max_len = max(len(s) for s in seqs)
    return [[s[t] if t < len(s) else fillvalue for s in seqs] for t in range(max_len)]


def batch2TrainData(pair_batch):
    pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
    input_batch = [p[0] + [EOS_token] for p in pair_batch]
    output_batch = [p[1] + [EOS_token] for p in pair_batch]
    lengths = torch.tensor([len(s) for s in input_batch])
    inp = torch.LongTensor(zeroPadding(input_batch))
    padList = zeroPadding(output_batch)
    max_target_len = len(padList)
    mask = torch.BoolTensor([[tok != PAD_token for tok in row] for row in padList])
    output = torch.LongTensor(padList)
    return inp, lengths, output, mask, max_target_len


class EncoderRNN(nn.Module):
    def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
        super().__init__()
        self.n_layers, self.hidden_size, self.embedding = n_layers, hidden_size, embedding
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                          dropout=(0 if n_layers == 1 else dropout), bidirectional=True)

    def forward(self, input_seq, input_lengths, hidden=None):
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
        outputs, hidden = self.gru(packed, hidden)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        outputs = outputs[:, :, :self.hidden_size] + outputs[:, :, self.hidden_size:]
        return outputs, hidden


class Attn(nn.Module):
    def __init__(self, method, hidden_size):
        super().__init__()
        self.method, self.hidden_size = method, hidden_size

    def dot_score(self, hidden, encoder_output):
        return torch.sum(hidden * encoder_output, dim=2)

    def forward(self, hidden, encoder_outputs):
        attn_energies = self.dot_score(hidden, encoder_outputs).t()
        return F.softmax(attn_energies, dim=1).unsqueeze(1)


class LuongAttnDecoderRNN(nn.Module):
    def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.1):
        super().__init__()
        self.embedding = embedding
        self.embedding_dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                          dropout=(0 if n_layers == 1 else dropout))
        self.concat = nn.Linear(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)
        self.attn = Attn(attn_model, hidden_size)

    def forward(self, input_step, last_hidden, encoder_outputs):
        embedded = self.embedding_dropout(self.embedding(input_step))
        rnn_output, hidden = self.gru(embedded, last_hidden)
        attn_weights = self.attn(rnn_output, encoder_outputs)
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
        rnn_output, context = rnn_output.squeeze(0), context.squeeze(1)
        concat_output = torch.tanh(self.concat(torch.cat((rnn_output, context), 1)))
        output = F.softmax(self.out(concat_output), dim=1)
        return output, hidden


def maskNLLLoss(inp, target, mask):
    nTotal = mask.sum()
    crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
    loss = crossEntropy.masked_select(mask).mean()
    return loss, nTotal.item()


def train(input_variable, lengths, target_variable, mask, max_target_len, encoder, decoder,
          encoder_optimizer, decoder_optimizer, batch_size, clip, teacher_forcing_ratio):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss, print_losses, n_totals = 0, [], 0

    encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
    decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
    decoder_hidden = encoder_hidden[:decoder.gru.num_layers]

    use_teacher_forcing = random.random() < teacher_forcing_ratio
    for t in range(max_target_len):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
        if use_teacher_forcing:
            decoder_input = target_variable[t].view(1, -1)
        else:
            _, topi = decoder_output.topk(1)
            decoder_input = torch.LongTensor([[topi[i][0] for i in range(batch_size)]])
        mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
        loss += mask_loss
        print_losses.append(mask_loss.item() * nTotal)
        n_totals += nTotal

    loss.backward()
    nn.utils.clip_grad_norm_(encoder.parameters(), clip)
    nn.utils.clip_grad_norm_(decoder.parameters(), clip)
    encoder_optimizer.step()
    decoder_optimizer.step()
    return sum(print_losses) / n_totals


def trainIters(pairs, encoder, decoder, encoder_optimizer, decoder_optimizer, n_iteration,
               batch_size, print_every, clip, teacher_forcing_ratio):
    training_batches = [batch2TrainData([random.choice(pairs) for _ in range(batch_size)])
                        for _ in range(n_iteration)]
    print_loss = 0
    for iteration in range(1, n_iteration + 1):
        input_variable, lengths, target_variable, mask, max_target_len = \
            training_batches[iteration - 1]
        loss = train(input_variable, lengths, target_variable, mask, max_target_len, encoder,
                     decoder, encoder_optimizer, decoder_optimizer, batch_size, clip,
                     teacher_forcing_ratio)
        print_loss += loss
        if iteration % print_every == 0:
            print_loss_avg = print_loss / print_every
            print("Iteration: {}; Percent complete: {:.1f}%; Average loss: {:.4f}".format(
                iteration, iteration / n_iteration * 100, print_loss_avg))
            print_loss = 0


def main():
    random.seed(0)
    torch.manual_seed(0)
    pairs = make_pairs(2000, random.Random(1))
    hidden_size, batch_size = 64, 32
    clip, teacher_forcing_ratio, learning_rate, decoder_learning_ratio = 50.0, 1.0, 0.0001, 5.0
    n_iteration, print_every = 200, 10

    embedding = nn.Embedding(VOCAB, hidden_size)
    encoder = EncoderRNN(hidden_size, embedding, 1, 0.1)
    decoder = LuongAttnDecoderRNN("dot", embedding, hidden_size, VOCAB, 1, 0.1)
    encoder.train()
    decoder.train()
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=learning_rate)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=learning_rate * decoder_learning_ratio)
    print("Starting Training!")
    trainIters(pairs, encoder, decoder, encoder_optimizer, decoder_optimizer, n_iteration,
               batch_size, print_every, clip, teacher_forcing_ratio)


if __name__ == "__main__":
    main()
