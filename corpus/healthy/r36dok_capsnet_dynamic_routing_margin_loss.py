"""CapsNet with dynamic routing-by-agreement, in the style of gram-ai/capsule-networks
(capsule_network.py): conv -> primary capsules -> digit capsules with 3 routing iterations,
margin loss on capsule lengths plus a 0.0005-weighted reconstruction loss from a decoder that
sees only the true class's capsule. Synthetic 16x16 "digits" (noisy stroke templates) stand in
for MNIST.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 5
IMG = 16
BATCH_SIZE = 32
NUM_EPOCHS = 4
NUM_ROUTING_ITERATIONS = 3


def make_digits(n, g):
    templates = torch.zeros(NUM_CLASSES, IMG, IMG)
    templates[0, 3:13, 4:6] = 1; templates[0, 3:13, 10:12] = 1; templates[0, 3:5, 4:12] = 1; templates[0, 11:13, 4:12] = 1
    templates[1, 2:14, 7:9] = 1
    templates[2, 3:5, 3:13] = 1; templates[2, 7:9, 3:13] = 1; templates[2, 11:13, 3:13] = 1
    templates[3, 2:14, 3:5] = 1; templates[3, 7:9, 3:13] = 1
    for i in range(10):
        templates[4, 3 + i, 3 + i:5 + i] = 1
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    x = torch.stack([torch.roll(templates[c], (int(s[0]), int(s[1])), (0, 1)) for c, s in zip(y, shifts)])
    x = (x * (0.7 + 0.3 * torch.rand(n, 1, 1, generator=g)) + 0.35 * torch.randn(n, IMG, IMG, generator=g)).clamp(0, 1)
    return x.unsqueeze(1), y


def softmax(input, dim=1):
    transposed_input = input.transpose(dim, len(input.size()) - 1)
    softmaxed_output = F.softmax(transposed_input.contiguous().view(-1, transposed_input.size(-1)), dim=-1)
    return softmaxed_output.view(*transposed_input.size()).transpose(dim, len(input.size()) - 1)


class CapsuleLayer(nn.Module):
    def __init__(self, num_capsules, num_route_nodes, in_channels, out_channels, kernel_size=None, stride=None,
                 num_iterations=NUM_ROUTING_ITERATIONS):
        super().__init__()
        self.num_route_nodes = num_route_nodes
        self.num_iterations = num_iterations
        self.num_capsules = num_capsules
        if num_route_nodes != -1:
            self.route_weights = nn.Parameter(0.1 * torch.randn(num_capsules, num_route_nodes, in_channels, out_channels))
        else:
            self.capsules = nn.ModuleList(
                [nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=0)
                 for _ in range(num_capsules)])

    @staticmethod
    def squash(tensor, dim=-1):
        squared_norm = (tensor ** 2).sum(dim=dim, keepdim=True)
        scale = squared_norm / (1 + squared_norm)
        return scale * tensor / torch.sqrt(squared_norm + 1e-8)

    def forward(self, x):
        if self.num_route_nodes != -1:
            priors = x[None, :, :, None, :] @ self.route_weights[:, None, :, :, :]
            logits = torch.zeros(*priors.size())
            for i in range(self.num_iterations):
                probs = softmax(logits, dim=0)
                outputs = self.squash((probs * priors).sum(dim=2, keepdim=True))
                if i != self.num_iterations - 1:
                    delta_logits = (priors * outputs).sum(dim=-1, keepdim=True)
                    logits = logits + delta_logits
        else:
            outputs = [capsule(x).view(x.size(0), -1, 1) for capsule in self.capsules]
            outputs = torch.cat(outputs, dim=-1)
            outputs = self.squash(outputs)
        return outputs


class CapsuleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=5, stride=1)
        self.primary_capsules = CapsuleLayer(num_capsules=8, num_route_nodes=-1, in_channels=32, out_channels=8,
                                             kernel_size=5, stride=2)
        self.digit_capsules = CapsuleLayer(num_capsules=NUM_CLASSES, num_route_nodes=8 * 4 * 4, in_channels=8,
                                           out_channels=16)
        self.decoder = nn.Sequential(
            nn.Linear(16 * NUM_CLASSES, 256), nn.ReLU(inplace=True),
            nn.Linear(256, 512), nn.ReLU(inplace=True),
            nn.Linear(512, IMG * IMG), nn.Sigmoid())

    def forward(self, x, y=None):
        x = F.relu(self.conv1(x), inplace=True)
        x = self.primary_capsules(x)
        x = self.digit_capsules(x).squeeze(2).squeeze(2).transpose(0, 1)
        classes = (x ** 2).sum(dim=-1) ** 0.5
        classes = F.softmax(classes, dim=-1)
        if y is None:
            _, max_length_indices = classes.max(dim=1)
            y = torch.eye(NUM_CLASSES).index_select(dim=0, index=max_length_indices)
        reconstructions = self.decoder((x * y[:, :, None]).reshape(x.size(0), -1))
        return classes, reconstructions


class CapsuleLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.reconstruction_loss = nn.MSELoss(reduction='sum')

    def forward(self, images, labels, classes, reconstructions):
        left = F.relu(0.9 - classes, inplace=True) ** 2
        right = F.relu(classes - 0.1, inplace=True) ** 2
        margin_loss = labels * left + 0.5 * (1. - labels) * right
        margin_loss = margin_loss.sum()
        assert torch.numel(images) == torch.numel(reconstructions)
        images = images.view(reconstructions.size()[0], -1)
        reconstruction_loss = self.reconstruction_loss(reconstructions, images)
        return (margin_loss + 0.0005 * reconstruction_loss) / images.size(0)


def main():
    g = torch.Generator().manual_seed(0)
    xtr, ytr = make_digits(640, g)
    xte, yte = make_digits(300, g)
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=BATCH_SIZE, shuffle=True)
    model = CapsuleNet()
    print('# parameters:', sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.Adam(model.parameters())
    capsule_loss = CapsuleLoss()
    for epoch in range(NUM_EPOCHS):
        model.train()
        tot, correct, n = 0.0, 0, 0
        for data, target in train_loader:
            labels = torch.eye(NUM_CLASSES).index_select(dim=0, index=target)
            optimizer.zero_grad()
            classes, reconstructions = model(data, labels)
            loss = capsule_loss(data, labels, classes, reconstructions)
            loss.backward()
            optimizer.step()
            tot += loss.item() * data.size(0)
            correct += (classes.argmax(1) == target).sum().item()
            n += data.size(0)
        model.eval()
        with torch.no_grad():
            classes, recon = model(xte)
            test_acc = (classes.argmax(1) == yte).float().mean().item()
            recon_err = F.mse_loss(recon, xte.view(xte.size(0), -1)).item()
        print(f'[Epoch {epoch + 1}] train loss {tot / n:.4f} train acc {correct / n:.3f} '
              f'test acc {test_acc:.3f} recon mse {recon_err:.4f}')


if __name__ == '__main__':
    main()
