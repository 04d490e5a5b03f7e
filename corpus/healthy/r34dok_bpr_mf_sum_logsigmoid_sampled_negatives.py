"""Bayesian Personalised Ranking (BPR) matrix factorisation, in the style of guoyang9/BPR-pytorch
(model.py + main.py + data_utils.BPRData + evaluate.metrics).

Synthetic implicit feedback: users and items have hidden taste vectors; every user "clicks" items
drawn from a softmax over the true affinities. Leave-one-out test: each user's last click is held
out and ranked against 99 items the user never clicked (HR@10 / NDCG@10).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data

torch.manual_seed(0)
np.random.seed(0)

LR = 0.01
LAMDA = 0.001
BATCH_SIZE = 4096
EPOCHS = 30
TOP_K = 10
FACTOR_NUM = 32
NUM_NG = 4
TEST_NUM_NG = 99


def make_data(user_num=300, item_num=400, clicks_per_user=21, dim=6):
    rng = np.random.RandomState(0)
    u = rng.randn(user_num, dim)
    v = rng.randn(item_num, dim)
    pop = rng.randn(item_num) * 0.5
    logits = 1.5 * u @ v.T / np.sqrt(dim) + pop
    train_data, test_data = [], []
    train_mat = set()
    for uid in range(user_num):
        p = np.exp(logits[uid] - logits[uid].max())
        p /= p.sum()
        items = rng.choice(item_num, size=clicks_per_user, replace=False, p=p)
        for it in items[:-1]:
            train_data.append([uid, int(it)])
            train_mat.add((uid, int(it)))
        held_out = int(items[-1])
        test_data.append([uid, held_out])
        negs = 0
        while negs < TEST_NUM_NG:
            j = rng.randint(item_num)
            if (uid, j) in train_mat or j == held_out:
                continue
            test_data.append([uid, j])
            negs += 1
    return train_data, test_data, user_num, item_num, train_mat


class BPRData(data.Dataset):
    def __init__(self, features, num_item, train_mat=None, num_ng=0, is_training=None):
        super(BPRData, self).__init__()
        self.features = features
        self.num_item = num_item
        self.train_mat = train_mat
        self.num_ng = num_ng
        self.is_training = is_training

    def ng_sample(self):
        assert self.is_training, 'no need to sampling when testing'
        self.features_fill = []
        for x in self.features:
            u, i = x[0], x[1]
            for t in range(self.num_ng):
                j = np.random.randint(self.num_item)
                while (u, j) in self.train_mat:
                    j = np.random.randint(self.num_item)
                self.features_fill.append([u, i, j])

    def __len__(self):
        return self.num_ng * len(self.features) if self.is_training else len(self.features)

    def __getitem__(self, idx):
        features = self.features_fill if self.is_training else self.features
        user = features[idx][0]
        item_i = features[idx][1]
        item_j = features[idx][2] if self.is_training else features[idx][1]
        return user, item_i, item_j


class BPR(nn.Module):
    def __init__(self, user_num, item_num, factor_num):
        super(BPR, self).__init__()
        self.embed_user = nn.Embedding(user_num, factor_num)
        self.embed_item = nn.Embedding(item_num, factor_num)

        nn.init.normal_(self.embed_user.weight, std=0.01)
        nn.init.normal_(self.embed_item.weight, std=0.01)

    def forward(self, user, item_i, item_j):
        user = self.embed_user(user)
        item_i = self.embed_item(item_i)
        item_j = self.embed_item(item_j)

        prediction_i = (user * item_i).sum(dim=-1)
        prediction_j = (user * item_j).sum(dim=-1)
        return prediction_i, prediction_j


def hit(gt_item, pred_items):
    return 1 if gt_item in pred_items else 0


def ndcg(gt_item, pred_items):
    if gt_item in pred_items:
        index = pred_items.index(gt_item)
        return np.reciprocal(np.log2(index + 2))
    return 0


def metrics(model, test_loader, top_k):
    HR, NDCG = [], []
    with torch.no_grad():
        for user, item_i, item_j in test_loader:
            prediction_i, prediction_j = model(user, item_i, item_j)
            _, indices = torch.topk(prediction_i, top_k)
            recommends = torch.take(item_i, indices).numpy().tolist()
            gt_item = item_i[0].item()
            HR.append(hit(gt_item, recommends))
            NDCG.append(ndcg(gt_item, recommends))
    return np.mean(HR), np.mean(NDCG)


train_data, test_data, user_num, item_num, train_mat = make_data()

train_dataset = BPRData(train_data, item_num, train_mat, NUM_NG, True)
test_dataset = BPRData(test_data, item_num, train_mat, 0, False)
train_loader = data.DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=0)
test_loader = data.DataLoader(test_dataset, batch_size=TEST_NUM_NG + 1, shuffle=False, num_workers=0)

model = BPR(user_num, item_num, FACTOR_NUM)
optimizer = optim.SGD(model.parameters(), lr=LR, weight_decay=LAMDA)

model.eval()
HR, NDCG = metrics(model, test_loader, TOP_K)
print("before training  HR: {:.3f}\tNDCG: {:.3f}".format(HR, NDCG))

count, best_hr = 0, 0
for epoch in range(EPOCHS):
    model.train()
    train_loader.dataset.ng_sample()
    epoch_loss = 0.0

    for user, item_i, item_j in train_loader:
        model.zero_grad()
        prediction_i, prediction_j = model(user, item_i, item_j)
        loss = - (prediction_i - prediction_j).sigmoid().log().sum()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        count += 1

    model.eval()
    HR, NDCG = metrics(model, test_loader, TOP_K)
    print("epoch {:03d} step {:4d} loss {:10.2f}  HR: {:.3f}\tNDCG: {:.3f}".format(
        epoch, count, epoch_loss, HR, NDCG))

    if HR > best_hr:
        best_hr, best_ndcg, best_epoch = HR, NDCG, epoch

print("End. Best epoch {:03d}: HR = {:.3f}, NDCG = {:.3f}".format(best_epoch, best_hr, best_ndcg))
