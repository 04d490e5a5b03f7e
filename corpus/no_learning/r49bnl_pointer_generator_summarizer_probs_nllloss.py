"""Pointer-generator summarizer (See et al. 2017) with coverage, trained on synthetic news stories.

Each story is a sequence of word ids; its reference summary is the lead of the story
(CNN/DailyMail style), so the decoder can either generate words or copy them from the source.
"""
import argparse
import time
import torch
from torch import nn, optim
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--vocab_size", type=int, default=1000)
parser.add_argument("--max_enc", type=int, default=20)
parser.add_argument("--max_dec", type=int, default=6)
parser.add_argument("--hidden", type=int, default=48)
parser.add_argument("--embed", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.15)
parser.add_argument("--cov_lambda", type=float, default=1.0)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(1)
PAD, SOS, EOS, UNK = 0, 1, 2, 3


class StoryDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.stories = torch.randint(4, args.vocab_size, (n, args.max_enc), generator=g)
        lead = self.stories[:, :args.max_dec - 1]
        eos = torch.full((n, 1), EOS)
        sos = torch.full((n, 1), SOS)
        self.summaries = torch.cat([sos, lead, eos], 1)

    def __len__(self):
        return len(self.stories)

    def __getitem__(self, i):
        return self.stories[i], self.summaries[i]


class Model(nn.Module):
    def __init__(self, args):
        super().__init__()
        h, e, v = args.hidden, args.embed, args.vocab_size
        self.vocab_size = v
        self.hidden_size = h
        self.embed = nn.Embedding(v, e)
        self.encoder = nn.LSTM(e, h, batch_first=True, bidirectional=True)
        self.decoder = nn.LSTMCell(e, h)
        self.W_init = nn.Linear(h * 2, h)
        self.wh = nn.Linear(h * 2, 1)
        self.ws = nn.Linear(h, 1)
        self.wx = nn.Linear(e, 1)
        self.Wh = nn.Linear(h * 2, h)
        self.Ws = nn.Linear(h, h)
        self.Wc = nn.Linear(1, h)
        self.v = nn.Linear(h, 1)
        self.V1 = nn.Linear(h * 3, h * 3)
        self.V2 = nn.Linear(h * 3, v)

    def forward(self, input, target):
        b, in_seq = input.shape
        tar_seq = target.shape[1]
        encoder_out, _ = self.encoder(self.embed(input))           # [b x in_seq x 2h]
        hx = torch.tanh(self.W_init(encoder_out.mean(1)))
        cx = torch.zeros_like(hx)
        coverage = torch.zeros(b, in_seq)
        cov_loss = 0
        enc_feat = self.Wh(encoder_out)                              # [b x in_seq x h]
        out_list = []
        for i in range(tar_seq - 1):
            embedded = self.embed(target[:, i])
            hx, cx = self.decoder(embedded, (hx, cx))
            attn1 = enc_feat + self.Ws(hx).unsqueeze(1) + self.Wc(coverage.unsqueeze(2))
            attn = F.softmax(self.v(torch.tanh(attn1)).squeeze(2), dim=1)   # [b x in_seq]
            context = torch.bmm(attn.unsqueeze(1), encoder_out).squeeze(1)  # [b x 2h]
            p_gen = torch.sigmoid(self.wh(context) + self.ws(hx) + self.wx(embedded))  # [b x 1]
            cov_loss = cov_loss + torch.sum(torch.min(attn, coverage)) / b
            coverage = coverage + attn
            p_vocab = F.softmax(self.V2(self.V1(torch.cat([hx, context], 1))), dim=1)
            p_copy = torch.zeros(b, self.vocab_size).scatter_add(1, input, attn)
            p_out = p_gen * p_vocab + (1 - p_gen) * p_copy           # [b x vocab]
            out_list.append(p_out)
        return torch.stack(out_list, 1), cov_loss


train_loader = DataLoader(StoryDataset(1024, 0), batch_size=args.batch_size, shuffle=True)
val_loader = DataLoader(StoryDataset(256, 1), batch_size=128)

model = Model(args)
optimizer = optim.Adagrad(model.parameters(), lr=args.lr, initial_accumulator_value=0.1)
criterion = nn.NLLLoss()


def evaluate():
    model.eval()
    correct = total = 0
    nll = 0.0
    with torch.no_grad():
        for stories, summaries in val_loader:
            out, _ = model(stories, summaries)
            gold = summaries[:, 1:]
            correct += (out.argmax(2) == gold).sum().item()
            total += gold.numel()
            nll += -torch.log(out.gather(2, gold.unsqueeze(2)) + 1e-12).sum().item()
    model.train()
    return correct / total, nll / total


t0 = time.time()
step = 0
for epoch in range(1, args.epochs + 1):
    for stories, summaries in train_loader:
        out, cov_loss = model(stories, summaries)
        loss = criterion(out.reshape(-1, out.size(2)), summaries[:, 1:].reshape(-1))
        total_loss = loss + args.cov_lambda * cov_loss
        optimizer.zero_grad()
        total_loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        optimizer.step()
        step += 1
        if step % 20 == 0:
            print(f"epoch {epoch} step {step}: loss {loss.item():.4f} cov_loss {cov_loss.item():.4f}")
    acc, val_nll = evaluate()
    print(f"== epoch {epoch}: val token acc {acc:.3f}  val nll/token {val_nll:.3f}")
print(f"done in {time.time() - t0:.1f}s")
