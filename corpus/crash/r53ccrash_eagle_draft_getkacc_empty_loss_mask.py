"""EAGLE-style draft head training for speculative decoding (toy scale).

A frozen base LM (embedding + GRU + lm_head) provides hidden states; a small
draft model learns to predict the next hidden state from the current hidden
state and the next token. Training uses only the assistant part of each
conversation (loss_mask); every epoch ends with the k-step acceptance accuracy
on the test conversations.
"""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
VOCAB, HIDDEN, MAX_LEN = 48, 32, 24


class BaseLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        out, _ = self.rnn(self.embed_tokens(input_ids))
        return out


def make_conversation(g, transition, prompt_len, answer_len):
    tokens = [int(torch.randint(0, VOCAB, (1,), generator=g))]
    for _ in range(prompt_len + answer_len - 1):
        tokens.append(int(torch.multinomial(transition[tokens[-1]], 1, generator=g)))
    mask = [0] * prompt_len + [1] * answer_len
    return tokens[:MAX_LEN], mask[:MAX_LEN]


class ConversationData(Dataset):
    def __init__(self, base, n_chat, n_long, seed):
        g = torch.Generator().manual_seed(seed)
        transition = F.softmax(torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(123)) * 3, dim=1)
        ids, masks = [], []
        for _ in range(n_chat):
            p, a = int(torch.randint(3, 9, (1,), generator=g)), int(torch.randint(12, 22, (1,), generator=g))
            t, m = make_conversation(g, transition, p, a)
            ids.append(t + [0] * (MAX_LEN - len(t)))
            masks.append(m + [0] * (MAX_LEN - len(m)))
        for _ in range(n_long):
            p, a = int(torch.randint(30, 60, (1,), generator=g)), int(torch.randint(12, 22, (1,), generator=g))
            t, m = make_conversation(g, transition, p, a)
            ids.append(t)
            masks.append(m)
        self.input_ids = torch.tensor(ids)
        self.loss_mask = torch.tensor(masks, dtype=torch.float)
        with torch.no_grad():
            self.hidden_states = base(self.input_ids)

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, i):
        hs, ids, mask = self.hidden_states[i], self.input_ids[i], self.loss_mask[i]
        return {
            "hidden_states": hs[:-1],
            "input_ids": ids[1:],
            "target": hs[1:],
            "loss_mask": mask[1:],
        }


class DraftModel(nn.Module):
    def __init__(self, embed_tokens):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.fc = nn.Linear(2 * HIDDEN, HIDDEN)
        self.layer = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, hidden_states, input_ids):
        with torch.no_grad():
            inputs_embeds = self.embed_tokens(input_ids)
        x = self.fc(torch.cat([inputs_embeds, hidden_states], dim=-1))
        x, _ = self.layer(x)
        return hidden_states + self.out(x)


@torch.no_grad()
def getkacc(model, data, head, max_length=3):
    hidden_states = data["hidden_states"]
    input_ids = data["input_ids"]
    loss_mask = data["loss_mask"]
    target = data["target"]
    total = [0 for _ in range(max_length)]
    correct = [0 for _ in range(max_length)]
    bs, sl = hidden_states.shape[0], hidden_states.shape[1]
    target_headout = head(target)
    for i in range(bs):
        for j in range(1, sl + 1):
            single_hidden_states = hidden_states[i, :j][None]
            single_input_ids = input_ids[i, :j][None]
            for k in range(max_length):
                pos = single_hidden_states.shape[1] - 1
                if pos >= sl or loss_mask[i, pos] == 0:
                    break
                target_out_token = torch.argmax(target_headout[i, pos])
                out_hidden = model(single_hidden_states, single_input_ids)
                last_hidden = out_hidden[:, -1]
                token = torch.argmax(head(last_hidden))
                total[k] += 1
                if token == target_out_token:
                    correct[k] += 1
                else:
                    for kk in range(k + 1, max_length):
                        total[kk] += 1
                    break
                single_hidden_states = torch.cat((single_hidden_states, last_hidden[None]), dim=1)
                single_input_ids = torch.cat((single_input_ids, token.view(1, 1)), dim=1)
    acc = [correct[i] / total[i] for i in range(len(correct))]
    return acc


def main():
    base = BaseLM()
    for p in base.parameters():
        p.requires_grad_(False)
    head = base.lm_head
    train_data = ConversationData(base, 430, 50, seed=1)
    test_data = ConversationData(base, 8, 4, seed=2)
    train_loader = DataLoader(train_data, batch_size=16, shuffle=True)
    test_loader = DataLoader(test_data, batch_size=4, shuffle=False)

    model = DraftModel(base.embed_tokens)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    criterion = nn.SmoothL1Loss(reduction="none")
    p_w, v_w = 0.1, 1.0
    t0 = time.time()
    for epoch in range(4):
        model.train()
        for batch_idx, data in enumerate(train_loader):
            predict = model(data["hidden_states"], data["input_ids"])
            with torch.no_grad():
                target_p = F.softmax(head(data["target"]), dim=2)
            out_logp = F.log_softmax(head(predict), dim=2)
            loss_mask = data["loss_mask"][:, :, None]
            plogp = target_p * out_logp
            ploss = -torch.sum(torch.sum(loss_mask * plogp, 2)) / (loss_mask.sum() + 1e-5)
            vloss = criterion(predict, data["target"])
            vloss = torch.sum(torch.mean(loss_mask * vloss, 2)) / (loss_mask.sum() + 1e-5)
            loss = v_w * vloss + p_w * ploss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if batch_idx % 10 == 0:
                print(f"epoch {epoch} step {batch_idx} vloss {vloss.item():.4f} ploss {ploss.item():.4f}")

        model.eval()
        k_acc = [[] for _ in range(3)]
        for batch_idx, data in enumerate(test_loader):
            acces = getkacc(model, data, head, max_length=3)
            for i in range(len(acces)):
                k_acc[i].append(acces[i])
        k_acc = [sum(a) / len(a) for a in k_acc]
        print(f"epoch {epoch} test 1/2/3-step acc " + " ".join(f"{a:.3f}" for a in k_acc)
              + f" ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
