"""Metric learning with a semi-hard triplet miner, after pytorch-metric-learning's
examples/notebooks/TripletMarginLossMNIST.ipynb.

pytorch_metric_learning and torchvision are not installed here, so the pieces the notebook
imports are written below: CosineSimilarity distance, TripletMarginMiner(type_of_triplets=
"semihard"), TripletMarginLoss with a ThresholdReducer(low=0), and a precision@1 computed on
test embeddings against train embeddings (the AccuracyCalculator's precision_at_1). MNIST is
replaced by synthetic 1x16x16 "glyphs": 10 classes, each a fixed random stroke template, drawn
shifted by up to 2 pixels, with random stroke intensity and pixel noise. The train/test functions,
the Net, Adam(lr=0.01) and the logging every 20 iterations follow the notebook.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


### MNIST code originally from https://github.com/pytorch/examples/blob/master/mnist/main.py ###
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(32 * 6 * 6, 64)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        return x


class CosineSimilarity:
    def __call__(self, query, ref=None):
        ref = query if ref is None else ref
        return F.normalize(query, dim=1) @ F.normalize(ref, dim=1).t()


def get_all_triplets_indices(labels):
    same = labels.unsqueeze(1) == labels.unsqueeze(0)
    diffs = ~same
    same = same.clone()
    same.fill_diagonal_(False)
    triplets = same.unsqueeze(2) & diffs.unsqueeze(1)
    return torch.where(triplets)


class TripletMarginMiner:
    """Returns triplets that violate the margin; type_of_triplets 'semihard' keeps those whose
    negative is farther than the positive but still inside the margin."""

    def __init__(self, margin=0.2, distance=None, type_of_triplets="all"):
        self.margin = margin
        self.distance = distance
        self.type_of_triplets = type_of_triplets
        self.num_triplets = 0

    def __call__(self, embeddings, labels):
        with torch.no_grad():
            anchor_idx, positive_idx, negative_idx = get_all_triplets_indices(labels)
            mat = self.distance(embeddings)
            ap_dist = mat[anchor_idx, positive_idx]
            an_dist = mat[anchor_idx, negative_idx]
            triplet_margin = ap_dist - an_dist  # similarities: larger is closer
            if self.type_of_triplets == "easy":
                threshold_condition = triplet_margin > self.margin
            else:
                threshold_condition = triplet_margin <= self.margin
                if self.type_of_triplets == "hard":
                    threshold_condition &= triplet_margin <= 0
                elif self.type_of_triplets == "semihard":
                    threshold_condition &= triplet_margin > 0
            self.num_triplets = int(threshold_condition.sum())
        return (anchor_idx[threshold_condition], positive_idx[threshold_condition], negative_idx[threshold_condition])


class TripletMarginLoss:
    def __init__(self, margin=0.05, distance=None, low=0):
        self.margin = margin
        self.distance = distance
        self.low = low

    def __call__(self, embeddings, labels, indices_tuple):
        anchor_idx, positive_idx, negative_idx = indices_tuple
        if len(anchor_idx) == 0:
            return (embeddings * 0).sum()
        mat = self.distance(embeddings)
        ap_dists = mat[anchor_idx, positive_idx]
        an_dists = mat[anchor_idx, negative_idx]
        loss = F.relu(an_dists - ap_dists + self.margin)
        # ThresholdReducer(low=0): average over the triplets whose loss is above 0
        above = loss > self.low
        if above.sum() == 0:
            return (embeddings * 0).sum()
        return loss[above].mean()


def make_glyphs(n, templates, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, len(templates), (n,), generator=g)
    imgs = torch.zeros(n, 1, 16, 16)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    for i in range(n):
        t = templates[labels[i]]
        imgs[i, 0] = torch.roll(t, shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(0, 1))
    imgs = imgs * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)) + 0.5 * torch.randn(n, 1, 16, 16, generator=g)
    return (imgs - 0.1307) / 0.3081, labels


def make_templates(seed=0):
    g = torch.Generator().manual_seed(seed)
    templates = []
    for _ in range(10):
        t = torch.zeros(16, 16)
        for _ in range(3):
            r0, c0 = torch.randint(3, 13, (2,), generator=g).tolist()
            if torch.rand(1, generator=g) < 0.5:
                t[r0, max(0, c0 - 4):c0 + 4] = 1.0
            else:
                t[max(0, r0 - 4):r0 + 4, c0] = 1.0
        templates.append(t)
    return templates


### MNIST code originally from https://github.com/pytorch/examples/blob/master/mnist/main.py ###
def train(model, loss_func, mining_func, device, train_loader, optimizer, epoch, history):
    model.train()
    for batch_idx, (data, labels) in enumerate(train_loader):
        data, labels = data.to(device), labels.to(device)
        optimizer.zero_grad()
        embeddings = model(data)
        indices_tuple = mining_func(embeddings, labels)
        loss = loss_func(embeddings, labels, indices_tuple)
        loss.backward()
        optimizer.step()
        history.append((loss.item(), mining_func.num_triplets))
        if batch_idx % 20 == 0:
            print(
                "Epoch {} Iteration {}: Loss = {}, Number of mined triplets = {}".format(
                    epoch, batch_idx, loss, mining_func.num_triplets
                )
            )


def get_all_embeddings(dataset, model):
    model.eval()
    with torch.no_grad():
        return model(dataset.tensors[0]), dataset.tensors[1]


### compute accuracy using the precision at 1 of a nearest-neighbour search ###
def test(train_set, test_set, model, accuracy_calculator=None):
    train_embeddings, train_labels = get_all_embeddings(train_set, model)
    test_embeddings, test_labels = get_all_embeddings(test_set, model)
    sim = CosineSimilarity()(test_embeddings, train_embeddings)
    nearest = sim.argmax(dim=1)
    precision_at_1 = (train_labels[nearest] == test_labels).float().mean().item()
    print("Test set accuracy (Precision@1) = {}".format(precision_at_1))
    return precision_at_1


device = torch.device("cpu")
torch.manual_seed(0)
np.random.seed(0)

batch_size = 128

templates = make_templates(seed=0)
x_train, y_train = make_glyphs(4000, templates, seed=1)
x_test, y_test = make_glyphs(1000, templates, seed=2)
dataset1 = TensorDataset(x_train, y_train)
dataset2 = TensorDataset(x_test, y_test)
train_loader = DataLoader(dataset1, batch_size=batch_size, shuffle=True)

model = Net().to(device)
optimizer = optim.Adam(model.parameters(), lr=0.01)
num_epochs = 4


### pytorch-metric-learning stuff ###
distance = CosineSimilarity()
loss_func = TripletMarginLoss(margin=0.2, distance=distance, low=0)
mining_func = TripletMarginMiner(margin=0.2, distance=distance, type_of_triplets="semihard")
### pytorch-metric-learning stuff ###

history = []
test(dataset1, dataset2, model)
for epoch in range(1, num_epochs + 1):
    train(model, loss_func, mining_func, device, train_loader, optimizer, epoch, history)
    test(dataset1, dataset2, model)

first, last = history[:20], history[-20:]
print("optimizer steps {}: mean loss first 20 = {:.4f} ({:.0f} mined), last 20 = {:.4f} ({:.0f} mined)".format(
    len(history), np.mean([h[0] for h in first]), np.mean([h[1] for h in first]),
    np.mean([h[0] for h in last]), np.mean([h[1] for h in last])))
