"""Sentence VAE (Bowman et al. 2016) on synthetic token sentences, after timbmg/Sentence-VAE.

GRU encoder -> (mean, logv) -> z -> GRU decoder with word dropout, NLL summed over tokens
(padding ignored) plus a KL term whose weight follows a logistic annealing schedule.
"""
import argparse
import logging
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.utils.rnn as rnn_utils
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(message)s")
logger = logging.getLogger("sentence_vae")

PAD, SOS, EOS, UNK = 0, 1, 2, 3


class SyntheticPTB(Dataset):
    """Sentences drawn from a few 'templates' (a phrase structure) with random fillers."""

    def __init__(self, n, vocab_size, max_len, seed):
        rng = np.random.RandomState(seed)
        templates = np.random.RandomState(123).randint(4, vocab_size, (8, max_len - 2))
        self.data = []
        for _ in range(n):
            t = templates[rng.randint(len(templates))].copy()
            length = rng.randint(max_len // 2, max_len - 1)
            noise = rng.rand(length) < 0.15
            words = np.where(noise, rng.randint(4, vocab_size, length), t[:length])
            inp = [SOS] + words.tolist()
            tgt = words.tolist() + [EOS]
            self.data.append({"input": inp, "target": tgt, "length": len(inp)})

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def collate(batch, max_len):
    out = {"input": torch.full((len(batch), max_len), PAD, dtype=torch.long),
           "target": torch.full((len(batch), max_len), PAD, dtype=torch.long),
           "length": torch.tensor([b["length"] for b in batch])}
    for i, b in enumerate(batch):
        out["input"][i, :b["length"]] = torch.tensor(b["input"])
        out["target"][i, :b["length"]] = torch.tensor(b["target"])
    return out


class SentenceVAE(nn.Module):
    def __init__(self, vocab_size, embedding_size, hidden_size, latent_size, word_dropout):
        super().__init__()
        self.word_dropout_rate = word_dropout
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.encoder_rnn = nn.GRU(embedding_size, hidden_size, batch_first=True)
        self.decoder_rnn = nn.GRU(embedding_size, hidden_size, batch_first=True)
        self.hidden2mean = nn.Linear(hidden_size, latent_size)
        self.hidden2logv = nn.Linear(hidden_size, latent_size)
        self.latent2hidden = nn.Linear(latent_size, hidden_size)
        self.outputs2vocab = nn.Linear(hidden_size, vocab_size)

    def forward(self, input_sequence, length):
        batch_size = input_sequence.size(0)
        sorted_lengths, sorted_idx = torch.sort(length, descending=True)
        input_sequence = input_sequence[sorted_idx]

        input_embedding = self.embedding(input_sequence)
        packed_input = rnn_utils.pack_padded_sequence(input_embedding, sorted_lengths.tolist(),
                                                      batch_first=True)
        _, hidden = self.encoder_rnn(packed_input)
        hidden = hidden.squeeze(0)

        mean = self.hidden2mean(hidden)
        logv = self.hidden2logv(hidden)
        std = torch.exp(0.5 * logv)
        z = torch.randn([batch_size, mean.size(1)]) * std + mean

        hidden = self.latent2hidden(z).unsqueeze(0)
        if self.word_dropout_rate > 0:
            prob = torch.rand(input_sequence.size())
            prob[(input_sequence.data - SOS) * (input_sequence.data - PAD) == 0] = 1
            decoder_input_sequence = input_sequence.clone()
            decoder_input_sequence[prob < self.word_dropout_rate] = UNK
            input_embedding = self.embedding(decoder_input_sequence)
        packed_input = rnn_utils.pack_padded_sequence(input_embedding, sorted_lengths.tolist(),
                                                      batch_first=True)
        outputs, _ = self.decoder_rnn(packed_input, hidden)
        padded_outputs = rnn_utils.pad_packed_sequence(outputs, batch_first=True,
                                                       total_length=input_sequence.size(1))[0]
        _, reversed_idx = torch.sort(sorted_idx)
        padded_outputs = padded_outputs[reversed_idx]
        logp = nn.functional.log_softmax(self.outputs2vocab(padded_outputs), dim=-1)
        return logp, mean[reversed_idx], logv[reversed_idx], z[reversed_idx]


def kl_anneal_function(anneal_function, step, k, x0):
    if anneal_function == "logistic":
        return float(1 / (1 + np.exp(-k * (step - x0))))
    elif anneal_function == "linear":
        return min(1, step / x0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.001)
    parser.add_argument("--max_sequence_length", type=int, default=16)
    parser.add_argument("--vocab_size", type=int, default=60)
    parser.add_argument("--embedding_size", type=int, default=64)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--latent_size", type=int, default=8)
    parser.add_argument("--word_dropout", type=float, default=0.3)
    parser.add_argument("--anneal_function", default="logistic")
    parser.add_argument("--k", type=float, default=0.05)
    parser.add_argument("--x0", type=int, default=120)
    parser.add_argument("--print_every", type=int, default=10)
    args = parser.parse_args()

    torch.manual_seed(0)
    splits = ["train", "valid"]
    datasets = {"train": SyntheticPTB(640, args.vocab_size, args.max_sequence_length, seed=1),
                "valid": SyntheticPTB(128, args.vocab_size, args.max_sequence_length, seed=2)}
    model = SentenceVAE(args.vocab_size, args.embedding_size, args.hidden_size,
                        args.latent_size, args.word_dropout)
    NLL = torch.nn.NLLLoss(ignore_index=PAD, reduction="sum")

    def loss_fn(logp, target, length, mean, logv, step):
        target = target[:, :torch.max(length).item()].contiguous().view(-1)
        logp = logp[:, :torch.max(length).item()].contiguous().view(-1, logp.size(2))
        nll_loss = NLL(logp, target)
        kl_loss = -0.5 * torch.sum(1 + logv - mean.pow(2) - logv.exp())
        kl_weight = kl_anneal_function(args.anneal_function, step, args.k, args.x0)
        return nll_loss, kl_loss, kl_weight

    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    step = 0
    for epoch in range(args.epochs):
        for split in splits:
            data_loader = DataLoader(datasets[split], batch_size=args.batch_size,
                                     shuffle=split == "train",
                                     collate_fn=lambda b: collate(b, args.max_sequence_length))
            tracker = defaultdict(list)
            if split == "train":
                model.train()
            else:
                model.eval()
            for iteration, batch in enumerate(data_loader):
                batch_size = batch["input"].size(0)
                logp, mean, logv, z = model(batch["input"], batch["length"])
                nll_loss, kl_loss, kl_weight = loss_fn(logp, batch["target"], batch["length"],
                                                       mean, logv, step)
                loss = (nll_loss + kl_weight * kl_loss) / batch_size

                if split == "train":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    step += 1

                tracker["ELBO"].append(loss.item())
                if split == "train" and (iteration % args.print_every == 0
                                         or iteration + 1 == len(data_loader)):
                    logger.info("%s Batch %04d/%i, Loss %9.4f, NLL-Loss %9.4f, KL-Loss %9.4f, "
                                "KL-Weight %6.3f", split.upper(), iteration, len(data_loader) - 1,
                                loss.item(), nll_loss.item() / batch_size,
                                kl_loss.item() / batch_size, kl_weight)
            logger.info("%s Epoch %02d/%i, Mean ELBO %9.4f", split.upper(), epoch,
                        args.epochs, float(np.mean(tracker["ELBO"])))


if __name__ == "__main__":
    main()
