"""Pointer Network (Vinyals et al. 2015) that learns to argsort short integer arrays,
after the pointer-nn-pytorch blog code: LSTM encoder, additive attention used as the pointer,
LSTM decoder fed the pointed-at element, teacher forcing 0.5, grad-norm clipping 1.0."""
import random
from typing import Tuple

import torch
import torch.nn as nn
import torch.optim as optim
import torch.nn.functional as F

random.seed(0)
torch.manual_seed(0)

HIDDEN_SIZE = 64
BATCH_SIZE = 32
STEPS_PER_EPOCH = 50
EPOCHS = 4


def batch(batch_size, min_len=5, max_len=8):
    array_len = torch.randint(low=min_len, high=max_len + 1, size=(1,))
    x = torch.randint(high=10, size=(batch_size, array_len))
    return x, x.argsort(dim=1)


class Encoder(nn.Module):
    def __init__(self, hidden_size: int):
        super(Encoder, self).__init__()
        self.lstm = nn.LSTM(1, hidden_size, batch_first=True)

    def forward(self, x: torch.Tensor):
        return self.lstm(x)


class Attention(nn.Module):
    def __init__(self, hidden_size, units):
        super(Attention, self).__init__()
        self.W1 = nn.Linear(hidden_size, units, bias=False)
        self.W2 = nn.Linear(hidden_size, units, bias=False)
        self.V = nn.Linear(units, 1, bias=False)

    def forward(self, encoder_out: torch.Tensor, decoder_hidden: torch.Tensor):
        decoder_hidden_time = decoder_hidden.unsqueeze(1)
        uj = self.W1(encoder_out) + self.W2(decoder_hidden_time)
        uj = torch.tanh(uj)
        uj = self.V(uj)
        aj = F.softmax(uj, dim=1)
        di_prime = aj * encoder_out
        di_prime = di_prime.sum(1)
        return di_prime, uj.squeeze(-1)


class Decoder(nn.Module):
    def __init__(self, hidden_size: int, attention_units: int = 10):
        super(Decoder, self).__init__()
        self.lstm = nn.LSTM(hidden_size + 1, hidden_size, batch_first=True)
        self.attention = Attention(hidden_size, attention_units)

    def forward(self, x: torch.Tensor, hidden: Tuple[torch.Tensor], encoder_out: torch.Tensor):
        ht = hidden[0][0]
        di, att_w = self.attention(encoder_out, ht)
        x = torch.cat([di.unsqueeze(1), x], dim=2)
        _, hidden = self.lstm(x, hidden)
        return hidden, att_w


class PointerNetwork(nn.Module):
    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super(PointerNetwork, self).__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, x: torch.Tensor, y: torch.Tensor, teacher_force_ratio=.5):
        encoder_in = x.unsqueeze(-1).type(torch.float)
        out, hs = self.encoder(encoder_in)
        loss = 0
        outputs = torch.zeros(out.size(1), out.size(0), dtype=torch.long)
        dec_in = torch.zeros(out.size(0), 1, 1, dtype=torch.float)

        for t in range(out.size(1)):
            hs, att_w = self.decoder(dec_in, hs, out)
            predictions = F.softmax(att_w, dim=1).argmax(1)
            teacher_force = random.random() < teacher_force_ratio
            idx = y[:, t] if teacher_force else predictions
            dec_in = torch.stack([x[b, idx[b].item()] for b in range(x.size(0))])
            dec_in = dec_in.view(out.size(0), 1, 1).type(torch.float)
            loss += F.cross_entropy(att_w, y[:, t])
            outputs[t] = predictions

        batch_loss = loss / y.size(0)
        return outputs, batch_loss


def train(model, optimizer, epoch, clip=1.):
    print('Epoch [{}] -- Train'.format(epoch))
    model.train()
    running = 0.
    for step in range(STEPS_PER_EPOCH):
        optimizer.zero_grad()
        x, y = batch(BATCH_SIZE)
        out, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        running += loss.item()
        if (step + 1) % 25 == 0:
            print('Epoch [{}] step {} loss: {:.4f}'.format(epoch, step + 1, running / 25))
            running = 0.


@torch.no_grad()
def evaluate(model, epoch, n=256):
    model.eval()
    x_val, y_val = batch(n)
    out, loss = model(x_val, y_val, teacher_force_ratio=0.)
    out = out.permute(1, 0)
    pred_sorted = x_val.gather(1, out)
    true_sorted = x_val.gather(1, y_val)
    elem_acc = (pred_sorted == true_sorted).float().mean().item()
    seq_acc = (pred_sorted == true_sorted).all(1).float().mean().item()
    print('Epoch [{}] -- Evaluate: loss {:.4f} element acc {:.3f} fully sorted {:.3f}'.format(
        epoch, loss.item(), elem_acc, seq_acc))
    for i in range(2):
        print('{} --> {} --> {}'.format(x_val[i].tolist(), pred_sorted[i].tolist(), true_sorted[i].tolist()))


encoder = Encoder(HIDDEN_SIZE)
decoder = Decoder(HIDDEN_SIZE)
ptr_net = PointerNetwork(encoder, decoder)
optimizer = optim.Adam(ptr_net.parameters(), lr=3e-3)

evaluate(ptr_net, 0)
for epoch in range(EPOCHS):
    train(ptr_net, optimizer, epoch + 1)
    evaluate(ptr_net, epoch + 1)
