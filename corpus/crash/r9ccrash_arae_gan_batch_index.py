"""Adversarially regularized autoencoder (ARAE) on a toy corpus of short sentences.

An LSTM autoencoder maps sentences to a unit-norm code; a WGAN (MLP generator and critic with
weight clamping) learns to produce codes like the encoder's, and the critic's gradient is fed
back into the encoder. Each outer iteration does one autoencoder step, then critic and
generator steps on a batch drawn from the part of the epoch already seen.
"""
import argparse
import math
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SUBJECTS = ["the cat", "a dog", "my friend", "the teacher", "a child", "the old man", "she", "he"]
VERBS = ["sees", "likes", "finds", "takes", "wants", "eats", "holds"]
OBJECTS = ["the ball", "a red apple", "the small book", "a cup", "the green hat", "some bread"]
TAILS = ["", "today", "at home", "in the park", "again"]


def make_corpus(n, rng):
    return [" ".join(w for w in [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS),
                                  rng.choice(TAILS)] if w) for _ in range(n)]


class Dictionary:
    def __init__(self, sentences):
        self.word2idx = {"<pad>": 0, "<sos>": 1, "<eos>": 2, "<oov>": 3}
        for s in sentences:
            for w in s.split():
                self.word2idx.setdefault(w, len(self.word2idx))
        self.idx2word = {i: w for w, i in self.word2idx.items()}

    def __len__(self):
        return len(self.word2idx)


def batchify(data, bsz, shuffle=False):
    if shuffle:
        random.shuffle(data)
    nbatch = len(data) // bsz
    batches = []
    for i in range(nbatch):
        batch = sorted(data[i * bsz:(i + 1) * bsz], key=len, reverse=True)
        lengths = [len(x) + 1 for x in batch]
        maxlen = max(lengths)
        source = [[1] + x + [0] * (maxlen - 1 - len(x)) for x in batch]
        target = [x + [2] + [0] * (maxlen - 1 - len(x)) for x in batch]
        batches.append((torch.LongTensor(source), torch.LongTensor(target).view(-1), lengths))
    return batches


class Seq2Seq(nn.Module):
    def __init__(self, emsize, nhidden, ntokens, noise_r=0.1):
        super().__init__()
        self.nhidden = nhidden
        self.noise_r = noise_r
        self.grad_norm = None
        self.embedding = nn.Embedding(ntokens, emsize)
        self.embedding_decoder = nn.Embedding(ntokens, emsize)
        self.encoder = nn.LSTM(emsize, nhidden, batch_first=True)
        self.decoder = nn.LSTM(emsize + nhidden, nhidden, batch_first=True)
        self.linear = nn.Linear(nhidden, ntokens)

    def store_grad_norm(self, grad):
        self.grad_norm = torch.norm(grad, 2, 1).detach().mean()
        return grad

    def encode(self, indices, lengths, noise):
        embeddings = self.embedding(indices)
        packed = nn.utils.rnn.pack_padded_sequence(embeddings, lengths, batch_first=True)
        _, (hidden, _) = self.encoder(packed)
        hidden = hidden[-1]
        hidden = hidden / torch.norm(hidden, p=2, dim=1, keepdim=True)
        if noise and self.noise_r > 0:
            hidden = hidden + torch.randn_like(hidden) * self.noise_r
        return hidden

    def decode(self, hidden, indices):
        maxlen = indices.size(1)
        all_hidden = hidden.unsqueeze(1).repeat(1, maxlen, 1)
        augmented = torch.cat([self.embedding_decoder(indices), all_hidden], 2)
        output, _ = self.decoder(augmented)
        return self.linear(output.contiguous().view(-1, self.nhidden))

    def forward(self, indices, lengths, noise, encode_only=False):
        hidden = self.encode(indices, lengths, noise)
        if encode_only:
            return hidden
        if hidden.requires_grad:
            hidden.register_hook(self.store_grad_norm)
        return self.decode(hidden, indices)


class MLP_G(nn.Module):
    def __init__(self, ninput, noutput, nhidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(ninput, nhidden), nn.BatchNorm1d(nhidden), nn.ReLU(),
                                 nn.Linear(nhidden, nhidden), nn.BatchNorm1d(nhidden), nn.ReLU(),
                                 nn.Linear(nhidden, noutput))

    def forward(self, z):
        return self.net(z)


class MLP_D(nn.Module):
    def __init__(self, ninput, nhidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(ninput, nhidden), nn.LeakyReLU(0.2),
                                 nn.Linear(nhidden, nhidden), nn.LeakyReLU(0.2),
                                 nn.Linear(nhidden, 1))

    def forward(self, x):
        return self.net(x).mean()


def main():
    parser = argparse.ArgumentParser(description="ARAE for text")
    parser.add_argument("--nhidden", type=int, default=64)
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--z_size", type=int, default=16)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--niters_ae", type=int, default=1)
    parser.add_argument("--niters_gan_d", type=int, default=5)
    parser.add_argument("--niters_gan_g", type=int, default=1)
    parser.add_argument("--lr_ae", type=float, default=1.0)
    parser.add_argument("--lr_gan_g", type=float, default=5e-4)
    parser.add_argument("--lr_gan_d", type=float, default=1e-4)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--gan_clamp", type=float, default=0.01)
    parser.add_argument("--gan_toenc", type=float, default=-0.01)
    parser.add_argument("--log_interval", type=int, default=4)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    rng = random.Random(args.seed)
    sentences = make_corpus(480, rng)
    corpus = Dictionary(sentences)
    ntokens = len(corpus)
    train = [[corpus.word2idx[w] for w in s.split()] for s in sentences]

    autoencoder = Seq2Seq(args.emsize, args.nhidden, ntokens)
    gan_gen = MLP_G(args.z_size, args.nhidden)
    gan_disc = MLP_D(args.nhidden)
    optimizer_ae = torch.optim.SGD(autoencoder.parameters(), lr=args.lr_ae)
    optimizer_gan_g = torch.optim.Adam(gan_gen.parameters(), lr=args.lr_gan_g, betas=(0.5, 0.999))
    optimizer_gan_d = torch.optim.Adam(gan_disc.parameters(), lr=args.lr_gan_d, betas=(0.5, 0.999))

    def train_ae(batch, total_loss_ae, start_time, i, epoch, n_batches):
        autoencoder.train()
        optimizer_ae.zero_grad()
        source, target, lengths = batch
        output = autoencoder(source, lengths, noise=True)
        mask = target.gt(0)
        masked_target = target.masked_select(mask)
        output_mask = mask.unsqueeze(1).expand(mask.size(0), ntokens)
        masked_output = output.masked_select(output_mask).view(-1, ntokens)
        loss = F.cross_entropy(masked_output, masked_target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(autoencoder.parameters(), args.clip)
        optimizer_ae.step()
        total_loss_ae += loss.item()
        if i % args.log_interval == 0 and i > 0:
            accuracy = (masked_output.argmax(1) == masked_target).float().mean().item()
            cur_loss = total_loss_ae / args.log_interval
            elapsed = time.time() - start_time
            print(f"| epoch {epoch:3d} | {i:5d}/{n_batches:5d} batches | ms/batch "
                  f"{elapsed * 1000 / args.log_interval:5.2f} | loss {cur_loss:5.2f} | "
                  f"ppl {math.exp(cur_loss):8.2f} | acc {accuracy:8.2f}")
            total_loss_ae = 0
            start_time = time.time()
        return total_loss_ae, start_time

    def grad_hook(grad):
        gan_norm = torch.norm(grad, 2, 1).detach().mean()
        normed_grad = grad * autoencoder.grad_norm / gan_norm
        return normed_grad * -math.fabs(args.gan_toenc)

    def train_gan_g():
        gan_gen.train()
        optimizer_gan_g.zero_grad()
        z = torch.randn(args.batch_size, args.z_size)
        errG = gan_disc(gan_gen(z))
        errG.backward()
        optimizer_gan_g.step()
        return errG

    def train_gan_d(batch):
        for p in gan_disc.parameters():
            p.data.clamp_(-args.gan_clamp, args.gan_clamp)
        autoencoder.train()
        optimizer_ae.zero_grad()
        gan_disc.train()
        optimizer_gan_d.zero_grad()
        source, target, lengths = batch
        real_hidden = autoencoder(source, lengths, noise=False, encode_only=True)
        real_hidden.register_hook(grad_hook)
        errD_real = gan_disc(real_hidden)
        errD_real.backward()
        z = torch.randn(args.batch_size, args.z_size)
        fake_hidden = gan_gen(z)
        errD_fake = gan_disc(fake_hidden.detach())
        (-errD_fake).backward()
        torch.nn.utils.clip_grad_norm_(autoencoder.parameters(), args.clip)
        optimizer_gan_d.step()
        optimizer_ae.step()
        errD = -(errD_real - errD_fake)
        return errD, errD_real, errD_fake

    print(f"{len(train)} sentences, vocabulary of {ntokens} words")
    for epoch in range(1, args.epochs + 1):
        train_data = batchify(train, args.batch_size, shuffle=True)
        total_loss_ae = 0
        epoch_start_time = start_time = time.time()
        niter = 0
        niter_gan = 1
        while niter < len(train_data):
            for i in range(args.niters_ae):
                if niter >= len(train_data):
                    break
                total_loss_ae, start_time = train_ae(train_data[niter], total_loss_ae, start_time,
                                                     niter, epoch, len(train_data))
                niter += 1
            for k in range(niter_gan):
                for i in range(args.niters_gan_d):
                    errD, errD_real, errD_fake = train_gan_d(train_data[random.randint(0, niter)])
                for i in range(args.niters_gan_g):
                    errG = train_gan_g()
        print(f"[{epoch}/{args.epochs}][{niter}/{len(train_data)}] Loss_D: {errD.item():.8f} "
              f"(Loss_D_real: {errD_real.item():.8f} Loss_D_fake: {errD_fake.item():.8f}) "
              f"Loss_G: {errG.item():.8f} | epoch time {time.time() - epoch_start_time:.1f}s")


if __name__ == "__main__":
    main()
