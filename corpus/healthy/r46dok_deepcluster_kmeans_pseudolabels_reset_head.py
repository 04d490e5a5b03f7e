"""DeepCluster (Caron et al. 2018) on synthetic unlabeled data: every epoch the features of the
whole set are PCA-whitened, L2-normalised and clustered with k-means, the cluster ids become the
pseudo-labels, a fresh top layer is made for them, and the network is trained one epoch on them
with a sampler that draws uniformly over the clusters."""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as data

torch.manual_seed(31)
np.random.seed(31)

N_CLASSES = 8
IN_DIM = 48


def make_unlabeled_set(n):
    g = torch.Generator().manual_seed(5)
    centers = torch.randn(N_CLASSES, 12, generator=g) * 1.5
    labels = torch.randint(0, N_CLASSES, (n,), generator=g)
    z = centers[labels] + 0.9 * torch.randn(n, 12, generator=g)
    mix = torch.randn(12, IN_DIM, generator=g) / math.sqrt(12)
    nuisance = 1.5 * torch.randn(n, IN_DIM, generator=g)
    x = torch.tanh(z @ mix) * 3.0 + nuisance
    return x, labels


class UnlabeledDataset(data.Dataset):
    def __init__(self, x, y):
        self.x = x
        self.y = y
        self.imgs = list(range(len(x)))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class ReassignedDataset(data.Dataset):
    def __init__(self, image_indexes, pseudolabels, dataset):
        self.imgs = self.make_dataset(image_indexes, pseudolabels, dataset)
        self.dataset = dataset

    def make_dataset(self, image_indexes, pseudolabels, dataset):
        label_to_idx = {label: idx for idx, label in enumerate(set(pseudolabels))}
        images = []
        for j, idx in enumerate(image_indexes):
            pseudolabel = label_to_idx[pseudolabels[j]]
            images.append((idx, pseudolabel))
        return images

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, index):
        idx, pseudolabel = self.imgs[index]
        return self.dataset.x[idx], pseudolabel


class UnifLabelSampler(data.Sampler):
    def __init__(self, N, images_lists):
        self.N = N
        self.images_lists = images_lists
        self.indexes = self.generate_indexes_epoch()

    def generate_indexes_epoch(self):
        nmb_non_empty_clusters = 0
        for i in range(len(self.images_lists)):
            if len(self.images_lists[i]) != 0:
                nmb_non_empty_clusters += 1

        size_per_pseudolabel = int(self.N / nmb_non_empty_clusters) + 1
        res = np.array([])

        for i in range(len(self.images_lists)):
            if len(self.images_lists[i]) == 0:
                continue
            indexes = np.random.choice(
                self.images_lists[i],
                size_per_pseudolabel,
                replace=(len(self.images_lists[i]) <= size_per_pseudolabel),
            )
            res = np.concatenate((res, indexes))

        np.random.shuffle(res)
        res = list(res.astype("int"))
        if len(res) >= self.N:
            return res[: self.N]
        res += res[: (self.N - len(res))]
        return res

    def __iter__(self):
        return iter(self.indexes)

    def __len__(self):
        return len(self.indexes)


def cluster_assign(images_lists, dataset):
    pseudolabels = []
    image_indexes = []
    for cluster, images in enumerate(images_lists):
        image_indexes.extend(images)
        pseudolabels.extend([cluster] * len(images))
    return ReassignedDataset(image_indexes, pseudolabels, dataset)


def preprocess_features(npdata, pca=32):
    x = torch.from_numpy(npdata).double()
    x = x - x.mean(0, keepdim=True)
    cov = x.t() @ x / (x.shape[0] - 1)
    eigval, eigvec = torch.linalg.eigh(cov)
    order = torch.argsort(eigval, descending=True)[:pca]
    x = x @ eigvec[:, order] * eigval[order].clamp_min(1e-8).pow(-0.5)
    row_sums = torch.linalg.norm(x, dim=1, keepdim=True)
    x = x / row_sums
    return x.float().numpy()


def run_kmeans(x, nmb_clusters, niter=20, verbose=False):
    xt = torch.from_numpy(x)
    g = torch.Generator().manual_seed(1234)
    centroids = xt[torch.randperm(len(xt), generator=g)[:nmb_clusters]].clone()
    for it in range(niter):
        dist = torch.cdist(xt, centroids)
        I = dist.argmin(1)
        for c in range(nmb_clusters):
            members = xt[I == c]
            if len(members) > 0:
                centroids[c] = members.mean(0)
            else:
                centroids[c] = xt[torch.randint(0, len(xt), (1,), generator=g)].squeeze(0)
    dist = torch.cdist(xt, centroids)
    I = dist.argmin(1)
    loss = dist.gather(1, I[:, None]).pow(2).sum().item()
    if verbose:
        print("k-means loss evolution: {0}".format(loss))
    return I.tolist(), loss


class Kmeans(object):
    def __init__(self, k):
        self.k = k

    def cluster(self, data, verbose=False):
        xb = preprocess_features(data)
        I, loss = run_kmeans(xb, self.k, verbose=verbose)
        self.images_lists = [[] for i in range(self.k)]
        for i in range(len(data)):
            self.images_lists[I[i]].append(i)
        return loss


def arrange_clustering(images_lists):
    pseudolabels = []
    image_indexes = []
    for cluster, images in enumerate(images_lists):
        image_indexes.extend(images)
        pseudolabels.extend([cluster] * len(images))
    indexes = np.argsort(image_indexes)
    return np.asarray(pseudolabels)[indexes]


def normalized_mutual_info_score(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    n = len(a)
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    cont = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(cont, (ai, bi), 1)
    pij = cont / n
    pi = pij.sum(1, keepdims=True)
    pj = pij.sum(0, keepdims=True)
    nz = pij > 0
    mi = (pij[nz] * np.log(pij[nz] / (pi @ pj)[nz])).sum()
    ha = -(pi[pi > 0] * np.log(pi[pi > 0])).sum()
    hb = -(pj[pj > 0] * np.log(pj[pj > 0])).sum()
    return mi / max(math.sqrt(ha * hb), 1e-12)


class MLPNet(nn.Module):
    def __init__(self, features, num_classes):
        super(MLPNet, self).__init__()
        self.features = features
        self.classifier = nn.Sequential(
            nn.Dropout(0.3),
            nn.Linear(128, 64),
            nn.ReLU(inplace=True),
        )
        self.top_layer = nn.Linear(64, num_classes)
        self._initialize_weights()

    def forward(self, x):
        x = self.features(x)
        x = self.classifier(x)
        if self.top_layer:
            x = self.top_layer(x)
        return x

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0, 0.05)
                m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm1d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()


def make_model(num_classes):
    features = nn.Sequential(
        nn.Linear(IN_DIM, 128),
        nn.BatchNorm1d(128),
        nn.ReLU(inplace=True),
        nn.Linear(128, 128),
        nn.BatchNorm1d(128),
        nn.ReLU(inplace=True),
    )
    return MLPNet(features, num_classes)


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class args:
    nmb_cluster = 24
    lr = 0.05
    wd = -5
    momentum = 0.9
    reassign = 1.0
    epochs = 10
    batch = 64
    verbose = True


def compute_features(dataloader, model, N):
    model.eval()
    with torch.no_grad():
        for i, (input_tensor, _) in enumerate(dataloader):
            aux = model(input_tensor).data.cpu().numpy()
            if i == 0:
                features = np.zeros((N, aux.shape[1]), dtype="float32")
            aux = aux.astype("float32")
            if i < len(dataloader) - 1:
                features[i * args.batch: (i + 1) * args.batch] = aux
            else:
                features[i * args.batch:] = aux
    return features


def train(loader, model, crit, opt, epoch):
    losses = AverageMeter()
    model.train()

    optimizer_tl = torch.optim.SGD(
        model.top_layer.parameters(),
        lr=args.lr,
        weight_decay=10 ** args.wd,
    )

    for i, (input_tensor, target) in enumerate(loader):
        output = model(input_tensor)
        loss = crit(output, target)

        losses.update(loss.item(), input_tensor.size(0))

        opt.zero_grad()
        optimizer_tl.zero_grad()
        loss.backward()
        opt.step()
        optimizer_tl.step()

        if args.verbose and (i % 10) == 0:
            print("Epoch: [{0}][{1}/{2}]\tLoss: {loss.val:.4f} ({loss.avg:.4f})".format(
                epoch, i, len(loader), loss=losses))

    return losses.avg


def main():
    x, y = make_unlabeled_set(1280)
    dataset = UnlabeledDataset(x, y)
    dataloader = data.DataLoader(dataset, batch_size=args.batch)

    model = make_model(args.nmb_cluster)
    fd = int(model.top_layer.weight.size()[1])
    model.top_layer = None

    optimizer = torch.optim.SGD(
        filter(lambda x: x.requires_grad, model.parameters()),
        lr=args.lr,
        momentum=args.momentum,
        weight_decay=10 ** args.wd,
    )
    criterion = nn.CrossEntropyLoss()

    deepcluster = Kmeans(args.nmb_cluster)
    cluster_log = []

    for epoch in range(args.epochs):
        end = time.time()

        model.top_layer = None
        model.classifier = nn.Sequential(*list(model.classifier.children())[:-1])

        features = compute_features(dataloader, model, len(dataset))

        clustering_loss = deepcluster.cluster(features, verbose=False)

        train_dataset = cluster_assign(deepcluster.images_lists, dataset)

        sampler = UnifLabelSampler(int(args.reassign * len(train_dataset)),
                                   deepcluster.images_lists)

        train_dataloader = data.DataLoader(
            train_dataset,
            batch_size=args.batch,
            sampler=sampler,
        )

        mlp = list(model.classifier.children())
        mlp.append(nn.ReLU(inplace=True))
        model.classifier = nn.Sequential(*mlp)
        model.top_layer = nn.Linear(fd, len(deepcluster.images_lists))
        model.top_layer.weight.data.normal_(0, 0.01)
        model.top_layer.bias.data.zero_()

        loss = train(train_dataloader, model, criterion, optimizer, epoch)

        current = arrange_clustering(deepcluster.images_lists)
        nmi_true = normalized_mutual_info_score(current, y.numpy())
        print("###### Epoch [{0}] ###### \n"
              "Time: {1:.3f} s\n"
              "Clustering loss: {2:.3f} \n"
              "ConvNet loss: {3:.3f}\n"
              "NMI against true classes: {4:.3f}".format(
                  epoch, time.time() - end, clustering_loss, loss, nmi_true))
        if cluster_log:
            nmi = normalized_mutual_info_score(current, arrange_clustering(cluster_log[-1]))
            print("NMI against previous assignment: {0:.3f}".format(nmi))
        print("####################### \n")
        cluster_log.append(deepcluster.images_lists)


if __name__ == "__main__":
    main()
