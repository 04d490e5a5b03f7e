"""DIEN (Deep Interest Evolution Network) click-through-rate model, written after the
torch-rechub ranking model: an interest-extractor GRU over the user's behaviour sequence with an
auxiliary click loss, an attention-gated AUGRU for interest evolution against the target item,
and an MLP on top. Trained with BCELoss plus alpha * auxiliary loss.

The data are synthetic e-commerce logs: 300 users, 200 items in 10 categories; each user has two
favourite categories, the behaviour history holds the last 10 clicked items, and the item's category
is logged with it, and the label says whether the user clicked the candidate item.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.nn import init
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(2024)
np.random.seed(2024)

N_USERS = 300
N_ITEMS = 200
N_CATS = 10
SEQ_LEN = 10
EMBED = 16
BATCH_SIZE = 64
EPOCHS = 4


def make_world(rng):
    item_cat = rng.integers(0, N_CATS, size=N_ITEMS)
    fav = np.stack([rng.choice(N_CATS, size=2, replace=False) for _ in range(N_USERS)])
    return item_cat, fav


def make_logs(n_samples, item_cat, fav, rng):
    items_by_cat = [np.flatnonzero(item_cat == c) for c in range(N_CATS)]
    users, hists, targets, labels = [], [], [], []
    for _ in range(n_samples):
        u = rng.integers(0, N_USERS)
        hist = []
        for _ in range(SEQ_LEN):
            c = fav[u, rng.integers(0, 2)] if rng.random() < 0.8 else rng.integers(0, N_CATS)
            hist.append(rng.choice(items_by_cat[c]))
        if rng.random() < 0.5:
            target = rng.choice(items_by_cat[fav[u, rng.integers(0, 2)]])
        else:
            target = rng.integers(0, N_ITEMS)
        p_click = 0.85 if item_cat[target] in fav[u] else 0.1
        users.append(u)
        hists.append(hist)
        targets.append(target)
        labels.append(float(rng.random() < p_click))
    return (np.array(users), np.array(hists), np.array(targets), np.array(labels, dtype=np.float32))


class ClickLogDataset(Dataset):
    def __init__(self, logs, item_cat):
        self.users, self.hists, self.targets, self.labels = logs
        self.item_cat = item_cat

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = {
            "user": torch.tensor(self.users[i]),
            "hist_item": torch.tensor(self.hists[i]),
            "target_item": torch.tensor(self.targets[i]),
            "hist_cate": torch.tensor(self.item_cat[self.hists[i]]),
            "target_cate": torch.tensor(self.item_cat[self.targets[i]]),
        }
        return x, torch.tensor(self.labels[i])


class AUGRUCell(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.Wu = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.Uu = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.bu = nn.Parameter(torch.zeros(1, embed_dim))
        self.Wr = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.Ur = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.br = nn.Parameter(torch.zeros(1, embed_dim))
        self.Wh = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.Uh = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))
        self.bh = nn.Parameter(torch.zeros(1, embed_dim))
        self.Wa = nn.Parameter(init.xavier_uniform_(torch.empty(embed_dim, embed_dim)))

    def attention(self, x, item):
        hWi = torch.sum(torch.matmul(x, self.Wa) * item, dim=1, keepdim=True)
        return torch.sigmoid(hWi)

    def forward(self, x, h_1, item):
        u = torch.sigmoid(x @ self.Wu + h_1 @ self.Uu + self.bu)
        r = torch.sigmoid(x @ self.Wr + h_1 @ self.Ur + self.br)
        h_hat = torch.tanh(x @ self.Wh + r * (h_1 @ self.Uh) + self.bh)
        u_hat = self.attention(x, item) * u
        return (1 - u_hat) * h_1 + u_hat * h_hat


class AUGRU(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.embed_dim = embed_dim
        self.augru_cell = AUGRUCell(embed_dim)

    def forward(self, x, item):
        h = x.new_zeros(x.shape[0], self.embed_dim)
        for t in range(x.shape[1]):
            h = self.augru_cell(x[:, t], h, item)
        return h


class DIEN(nn.Module):
    def __init__(self, embed_dim, mlp_dims, history_labels, alpha=0.2):
        super().__init__()
        self.alpha = alpha
        self.user_embedding = nn.Embedding(N_USERS, embed_dim)
        self.item_embedding = nn.Embedding(N_ITEMS, embed_dim)
        self.cate_embedding = nn.Embedding(N_CATS, embed_dim)
        self.interest_extractor = nn.GRU(embed_dim, embed_dim, batch_first=True)
        self.interest_evolving = AUGRU(embed_dim)
        layers, in_dim = [], 4 * embed_dim
        for d in mlp_dims:
            layers += [nn.Linear(in_dim, d), nn.PReLU(), nn.Dropout(0.1)]
            in_dim = d
        layers.append(nn.Linear(in_dim, 1))
        self.mlp = nn.Sequential(*layers)
        self.history_labels = torch.Tensor(history_labels)
        self.BCELoss = nn.BCELoss()

    def auxiliary(self, outs, history_features, history_labels):
        history_features = history_features.reshape(-1, history_features.shape[2])
        outs = outs.reshape(-1, outs.shape[2])
        out = torch.sum(outs * history_features, dim=1)
        out = torch.unsqueeze(torch.sigmoid(out), 1)
        history_labels = history_labels.reshape(-1, 1).float()
        return self.BCELoss(out, history_labels)

    def forward(self, x):
        embed_user = self.user_embedding(x["user"])
        embed_history = self.item_embedding(x["hist_item"]) + self.cate_embedding(x["hist_cate"])
        embed_target = self.item_embedding(x["target_item"]) + self.cate_embedding(x["target_cate"])

        outs, _ = self.interest_extractor(embed_history)
        auxi_loss = self.auxiliary(outs, embed_history, self.history_labels)
        h = self.interest_evolving(outs, embed_target)

        mlp_in = torch.cat([h, embed_target, h * embed_target, embed_user], dim=1)
        y = self.mlp(mlp_in)
        return torch.sigmoid(y.squeeze(1)), self.alpha * auxi_loss


def auc_score(y_true, y_pred):
    order = np.argsort(y_pred)
    ranks = np.empty(len(y_pred))
    ranks[order] = np.arange(1, len(y_pred) + 1)
    n_pos = y_true.sum()
    n_neg = len(y_true) - n_pos
    return (ranks[y_true == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


rng = np.random.default_rng(7)
item_cat, fav = make_world(rng)
train_logs = make_logs(4000, item_cat, fav, rng)
val_logs = make_logs(1000, item_cat, fav, rng)
train_loader = DataLoader(ClickLogDataset(train_logs, item_cat), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(ClickLogDataset(val_logs, item_cat), batch_size=256)
print(f"train samples {len(train_logs[3])}, click rate {train_logs[3].mean():.3f}")

model = DIEN(EMBED, mlp_dims=[64, 32], history_labels=[1] * SEQ_LEN, alpha=0.2)
criterion = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-6)

for epoch in range(EPOCHS):
    model.train()
    total, n = 0.0, 0
    for step, (x, y) in enumerate(train_loader):
        y_pred, aux_loss = model(x)
        loss = criterion(y_pred, y) + aux_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        n += len(y)
        if step % 20 == 0:
            print(f"epoch {epoch} step {step:3d}  loss {loss.item():.4f}  aux {aux_loss.item():.4f}")

    model.eval()
    preds, trues = [], []
    with torch.no_grad():
        for x, y in val_loader:
            y_pred, _ = model(x)
            preds.append(y_pred.numpy())
            trues.append(y.numpy())
    preds, trues = np.concatenate(preds), np.concatenate(trues)
    print(f"epoch {epoch}: train loss {total / n:.4f}  val auc {auc_score(trues, preds):.4f}")
