"""Static HyperNetwork (Ha et al.) in the style of g1910/HyperNetworks: every 3x3 conv kernel of the
primary network is produced by a shared two-layer hypernetwork from a learned per-layer embedding z.
The primary network holds no conv weights of its own; small synthetic image classification task."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class HyperNetwork(nn.Module):
    def __init__(self, f_size=3, z_dim=16, out_size=16, in_size=16):
        super().__init__()
        self.z_dim, self.f_size, self.out_size, self.in_size = z_dim, f_size, out_size, in_size
        self.w1 = nn.Parameter(torch.fmod(torch.randn((z_dim, out_size * f_size * f_size)), 2))
        self.b1 = nn.Parameter(torch.fmod(torch.randn((out_size * f_size * f_size)), 2))
        self.w2 = nn.Parameter(torch.fmod(torch.randn((z_dim, in_size * z_dim)), 2))
        self.b2 = nn.Parameter(torch.fmod(torch.randn((in_size * z_dim)), 2))

    def forward(self, z):
        h_in = torch.matmul(z, self.w2) + self.b2
        h_in = h_in.view(self.in_size, self.z_dim)
        h_final = torch.matmul(h_in, self.w1) + self.b1
        kernel = h_final.view(self.out_size, self.in_size, self.f_size, self.f_size)
        return kernel


class Embedding(nn.Module):
    def __init__(self, z_num, z_dim):
        super().__init__()
        self.z_list = nn.ParameterList()
        self.z_num = z_num
        h, k = z_num
        for i in range(h * k):
            self.z_list.append(nn.Parameter(torch.fmod(torch.randn(z_dim), 2)))

    def forward(self, hyper_net):
        ww = []
        h, k = self.z_num
        for i in range(h):
            w = []
            for j in range(k):
                w.append(hyper_net(self.z_list[i * k + j]))
            ww.append(torch.cat(w, dim=1))
        return torch.cat(ww, dim=0)


class ResBlock(nn.Module):
    def __init__(self, in_size=16, out_size=16):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(out_size)
        self.bn2 = nn.BatchNorm2d(out_size)

    def forward(self, x, conv1_w, conv2_w):
        residual = x
        out = F.relu(self.bn1(F.conv2d(x, conv1_w, padding=1)))
        out = self.bn2(F.conv2d(out, conv2_w, padding=1))
        return F.relu(out + residual)


class PrimaryNetwork(nn.Module):
    def __init__(self, z_dim=16, n_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.z_dim = z_dim
        self.hope = HyperNetwork(z_dim=z_dim)
        self.zs_size = [[1, 1], [1, 1], [2, 2], [2, 2]]
        self.filter_size = [[16, 16], [16, 16], [16, 32], [32, 32]]
        self.res_net = nn.ModuleList([ResBlock(16, 16), ResBlock(32, 32)])
        self.zs = nn.ModuleList([Embedding(self.zs_size[i], z_dim) for i in range(len(self.zs_size))])
        self.proj = nn.Conv2d(16, 32, 1)
        self.final = nn.Linear(32, n_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        w1 = self.zs[0](self.hope)
        w2 = self.zs[1](self.hope)
        x = self.res_net[0](x, w1, w2)
        x = self.proj(F.max_pool2d(x, 2))
        w3 = self.zs[2](self.hope)
        w4 = self.zs[3](self.hope)
        x = self.res_net[1](x, w3, w4)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.final(x)


class Shapes(Dataset):
    """4 classes of 12x12 images: horizontal bar, vertical bar, diagonal, ring, randomly shifted, noisy."""
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(12.0), torch.arange(12.0), indexing="ij")
        self.x = torch.empty(n, 1, 12, 12)
        self.y = torch.randint(0, 4, (n,), generator=g)
        for i in range(n):
            cx, cy = torch.randint(3, 9, (2,), generator=g).float()
            c = self.y[i].item()
            if c == 0:
                img = (yy - cy).abs() < 1
            elif c == 1:
                img = (xx - cx).abs() < 1
            elif c == 2:
                img = ((xx - cx) - (yy - cy)).abs() < 1
            else:
                r = ((xx - cx) ** 2 + (yy - cy) ** 2).sqrt()
                img = (r - 2.5).abs() < 0.8
            self.x[i, 0] = img.float() + 0.4 * torch.randn(12, 12, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def main():
    train_loader = DataLoader(Shapes(1024, 1), batch_size=64, shuffle=True)
    test_loader = DataLoader(Shapes(512, 2), batch_size=256)
    net = PrimaryNetwork()
    print("parameters:", sum(p.numel() for p in net.parameters()))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.002)
    criterion = nn.CrossEntropyLoss()
    print(f"epoch 0 test acc {evaluate(net, test_loader):.3f}")
    for epoch in range(1, 7):
        running = 0.0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(net(x), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch} loss {running / len(train_loader):.4f} test acc {evaluate(net, test_loader):.3f}")


if __name__ == "__main__":
    main()
