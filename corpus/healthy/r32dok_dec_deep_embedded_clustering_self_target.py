"""Deep Embedded Clustering (Xie, Girshick, Farhadi 2016) in the style of vlukiyanov/pt-dec:
pretrain a denoising autoencoder, run k-means on its codes to initialise the cluster centres,
then train encoder + centres on KL(P || Q), where Q is the Student's-t soft assignment and the
target P is Q sharpened (q^2 / cluster frequency), recomputed from each batch and detached.
No labels are used in training; they only score the clustering (best one-to-one mapping).

Synthetic data: 4 clusters in a 4-d latent space, pushed through a fixed random nonlinear map to 40-d.
"""
import itertools

import torch
import torch.nn as nn
from torch.optim import SGD
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_CLUSTERS, LATENT, DIM = 4, 4, 40


def make_data(n, g):
    centers = 2.2 * torch.randn(N_CLUSTERS, LATENT, generator=g)
    labels = torch.randint(0, N_CLUSTERS, (n,), generator=g)
    z = centers[labels] + torch.randn(n, LATENT, generator=g)
    w1 = torch.randn(LATENT, 64, generator=g) / 2
    w2 = torch.randn(64, DIM, generator=g) / 8
    x = torch.tanh(z @ w1) @ w2 + 0.05 * torch.randn(n, DIM, generator=g)
    x = (x - x.mean(0)) / x.std(0)
    return x, labels


class AutoEncoder(nn.Module):
    def __init__(self, dims=(DIM, 64, 64, 8)):
        super().__init__()
        enc, dec = [], []
        for i in range(len(dims) - 1):
            enc.append(nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                enc.append(nn.ReLU())
        rdims = dims[::-1]
        for i in range(len(rdims) - 1):
            dec.append(nn.Linear(rdims[i], rdims[i + 1]))
            if i < len(rdims) - 2:
                dec.append(nn.ReLU())
        self.encoder = nn.Sequential(*enc)
        self.decoder = nn.Sequential(*dec)
        self.corruption = nn.Dropout(0.2)

    def forward(self, x):
        return self.decoder(self.encoder(self.corruption(x)))


class ClusterAssignment(nn.Module):
    def __init__(self, cluster_number, embedding_dimension, alpha=1.0):
        super().__init__()
        self.cluster_number = cluster_number
        self.alpha = alpha
        initial_cluster_centers = torch.zeros(cluster_number, embedding_dimension)
        nn.init.xavier_uniform_(initial_cluster_centers)
        self.cluster_centers = nn.Parameter(initial_cluster_centers)

    def forward(self, batch):
        norm_squared = torch.sum((batch.unsqueeze(1) - self.cluster_centers) ** 2, 2)
        numerator = 1.0 / (1.0 + (norm_squared / self.alpha))
        power = float(self.alpha + 1) / 2
        numerator = numerator ** power
        return numerator / torch.sum(numerator, dim=1, keepdim=True)


class DEC(nn.Module):
    def __init__(self, cluster_number, hidden_dimension, encoder, alpha=1.0):
        super().__init__()
        self.encoder = encoder
        self.cluster_number = cluster_number
        self.assignment = ClusterAssignment(cluster_number, hidden_dimension, alpha)

    def forward(self, batch):
        return self.assignment(self.encoder(batch))


def target_distribution(batch):
    weight = (batch ** 2) / torch.sum(batch, 0)
    return (weight.t() / torch.sum(weight, 1)).t()


def cluster_accuracy(y_true, y_predicted):
    best = 0
    for perm in itertools.permutations(range(N_CLUSTERS)):
        mapped = torch.tensor(perm)[y_predicted]
        best = max(best, (mapped == y_true).float().mean().item())
    return best


def kmeans(x, k, n_init=10, iters=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    best_inertia, best = float("inf"), None
    for _ in range(n_init):
        centers = x[torch.randperm(len(x), generator=g)[:k]].clone()
        for _ in range(iters):
            assign = torch.cdist(x, centers).argmin(1)
            for c in range(k):
                if (assign == c).any():
                    centers[c] = x[assign == c].mean(0)
        inertia = ((x - centers[assign]) ** 2).sum().item()
        if inertia < best_inertia:
            best_inertia, best = inertia, (centers, assign)
    return best


def pretrain(autoencoder, loader, epochs):
    optimizer = SGD(autoencoder.parameters(), lr=0.1, momentum=0.9)
    scheduler = StepLR(optimizer, 100, gamma=0.1)
    loss_function = nn.MSELoss()
    for epoch in range(epochs):
        autoencoder.train()
        for (batch, _) in loader:
            output = autoencoder(batch)
            loss = loss_function(output, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"pretrain epoch {epoch}  reconstruction loss {loss.item():.4f}")


@torch.no_grad()
def predict(model, x):
    model.eval()
    return model(x).max(1)[1]


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x, y = make_data(2048, g)
    dataset = TensorDataset(x, y)
    train_dataloader = DataLoader(dataset, batch_size=256, shuffle=True)

    autoencoder = AutoEncoder()
    pretrain(autoencoder, train_dataloader, epochs=8)

    model = DEC(cluster_number=N_CLUSTERS, hidden_dimension=8, encoder=autoencoder.encoder)
    optimizer = SGD(model.parameters(), lr=0.05, momentum=0.9)

    model.train()
    with torch.no_grad():
        features = model.encoder(x)
    cluster_centers, predicted = kmeans(features, N_CLUSTERS)
    predicted_previous = predicted.clone()
    accuracy = cluster_accuracy(y, predicted)
    print(f"k-means on pretrained codes: cluster accuracy {accuracy:.3f}")
    with torch.no_grad():
        model.assignment.cluster_centers.copy_(cluster_centers)

    loss_function = nn.KLDivLoss(reduction="sum")
    stopping_delta = 0.000001
    for epoch in range(12):
        model.train()
        epoch_loss = 0.0
        for batch, _ in train_dataloader:
            output = model(batch)
            target = target_distribution(output).detach()
            loss = loss_function(output.log(), target) / output.shape[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step(closure=None)
            epoch_loss += loss.item()
        predicted = predict(model, x)
        delta_label = float((predicted != predicted_previous).float().sum().item()) / predicted_previous.shape[0]
        if delta_label < stopping_delta:
            print(f'Early stopping as label delta "{delta_label:1.5f}" less than "{stopping_delta:1.5f}".')
            break
        predicted_previous = predicted
        accuracy = cluster_accuracy(y, predicted)
        print(f"dec epoch {epoch}  kl loss {epoch_loss / len(train_dataloader):.5f}  "
              f"label delta {delta_label:.4f}  cluster accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
