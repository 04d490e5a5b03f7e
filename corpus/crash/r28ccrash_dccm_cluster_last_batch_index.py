"""Deep comprehensive correlation mining (DCCM) style image clustering.

Every large batch is first passed through the network without gradients to build a
pseudo-graph (pairwise similarity of the predictions, thresholded) and pseudo-labels;
the large batch is then cut into small shuffled batches that are augmented and trained
with a graph loss and a weighted label loss. Clustering ACC is measured every epoch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(1234)
np.random.seed(1234)

num_classes = 4
large_bs = 256
small_bs = 32
repeated = 1
thresh = 0.9
epochs = 2
coeff = {"label": 1.0, "graph": 5.0}


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    protos = F.avg_pool2d(protos, 3, stride=1, padding=1) * 2.0
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = protos[y] + 0.6 * torch.randn(n, 3, 16, 16, generator=g)
    return x, y


class ClusterNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        return F.softmax(self.head(self.features(x)), dim=1)


def comp_simi(vec):
    similarity = torch.mm(vec, vec.t())
    weights, labels = vec.max(dim=1)
    return similarity, labels, weights


class WeightedBCE(nn.Module):
    def forward(self, vec, labels, weights):
        onehot = F.one_hot(labels, vec.shape[1]).float()
        loss = F.binary_cross_entropy(vec.clamp(1e-6, 1 - 1e-6), onehot, reduction="none").sum(1)
        return (loss * weights).mean()


def augment(x):
    flip = torch.rand(x.shape[0]) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    return x + 0.1 * torch.randn_like(x)


def clustering_acc(gt, pred):
    best = 0
    import itertools
    for perm in itertools.permutations(range(num_classes)):
        best = max(best, (np.array(perm)[pred] == gt).mean())
    return best


x_all, y_all = make_images(2000, 0)
dataset = TensorDataset(x_all, y_all)
loader = DataLoader(dataset, batch_size=large_bs, shuffle=True)

model = ClusterNet(num_classes)
optimizer = torch.optim.RMSprop(model.parameters(), lr=2e-3, alpha=0.9)
crit_graph = nn.BCELoss()
crit_label = WeightedBCE()


def test(loader, model, epoch):
    model.eval()
    gnd, pred = [], []
    with torch.no_grad():
        for input_tensor, target in loader:
            vec = model(input_tensor)
            gnd.extend(target.numpy())
            pred.extend(vec.argmax(1).numpy())
    acc = clustering_acc(np.array(gnd), np.array(pred))
    print(f"Epoch [{epoch}/{epochs}]  ACC against ground truth label: {acc:.3f}")
    return acc


def train(loader, model, optimizer, epoch):
    model.train()
    step = 0
    for i, (input_tensor, target) in enumerate(loader):
        index_loc = np.arange(large_bs)
        with torch.no_grad():
            vec = model(input_tensor)
        similarity, labels, weights = comp_simi(vec)
        mask = similarity.ge(thresh)

        for k in range(repeated):
            np.random.shuffle(index_loc)
            for j in range(similarity.shape[0] // small_bs):
                address = index_loc[np.arange(j * small_bs, (j + 1) * small_bs)]
                input_bs = input_tensor[address]
                out_target = labels[address].detach()
                mask_target = mask[address, :][:, address].float()
                weights_batch = weights[address]

                vec_b = model(augment(input_bs))
                simi_batch, _, _ = comp_simi(vec_b)
                simi_batch = simi_batch / torch.max(simi_batch)

                _label = crit_label(vec_b, out_target, weights_batch)
                _graph = crit_graph(simi_batch.clamp(0, 1), mask_target)
                loss = coeff["label"] * _label + coeff["graph"] * _graph

                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
        print(f"Epoch: [{epoch}/{epochs}][{i}/{len(loader)}]  Loss: {loss.item():.4f}  "
              f"graph: {_graph.item():.4f}  label: {_label.item():.4f}")


for epoch in range(epochs):
    test(loader, model, epoch)
    train(loader, model, optimizer, epoch)
test(loader, model, epochs)
