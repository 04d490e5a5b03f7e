"""LRCN human activity recognition: a frozen conv feature extractor with a trainable fc,
an LSTM over the frames, trained with CrossEntropyLoss on synthetic action clips."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
N_CLASS = 20


class ClipDataset(Dataset):
    def __init__(self, n, prototypes, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASS, (n,), generator=g)
        base = prototypes[self.labels]
        self.clips = base.unsqueeze(1).repeat(1, 6, 1, 1, 1) + 0.5 * torch.randn(n, 6, 3, 16, 16, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.clips[i], self.labels[i]


class Pretrained_conv(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.conv_model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                        nn.Flatten())
        for param in self.conv_model.parameters():
            param.requires_grad = False
        self.fc = nn.Linear(128, latent_dim)

    def forward(self, x):
        return self.fc(self.conv_model(x))


class Lstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, lstm_layers, bidirectional):
        super().__init__()
        self.Lstm = nn.LSTM(latent_dim, hidden_size=hidden_size, num_layers=lstm_layers, batch_first=True, bidirectional=bidirectional)

    def forward(self, x):
        output, _ = self.Lstm(x)
        return output


class ConvLstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, lstm_layers, bidirectional, n_class):
        super().__init__()
        self.conv_model = Pretrained_conv(latent_dim)
        self.Lstm = Lstm(latent_dim, hidden_size, lstm_layers, bidirectional)
        self.output_layer = nn.Sequential(
            nn.Linear(2 * hidden_size if bidirectional else hidden_size, n_class),
            nn.Softmax(dim=-1)
        )

    def forward(self, x):
        batch_size, timesteps, channel_x, h_x, w_x = x.shape
        conv_input = x.view(batch_size * timesteps, channel_x, h_x, w_x)
        conv_output = self.conv_model(conv_input)
        lstm_input = conv_output.view(batch_size, timesteps, -1)
        lstm_output = self.Lstm(lstm_input)
        lstm_output = lstm_output[:, -1, :]
        output = self.output_layer(lstm_output)
        return output


def train_model(model, dataloader, optimizer, criterion):
    model.train()
    train_loss, correct, n = 0.0, 0, 0
    for local_images, local_labels in dataloader:
        optimizer.zero_grad()
        output = model(local_images)
        loss = criterion(output, local_labels)
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * len(local_labels)
        correct += (output.argmax(1) == local_labels).sum().item()
        n += len(local_labels)
    return train_loss / n, correct / n


@torch.no_grad()
def test_model(model, dataloader, criterion):
    model.eval()
    val_loss, correct, n = 0.0, 0, 0
    for local_images, local_labels in dataloader:
        output = model(local_images)
        val_loss += criterion(output, local_labels).item() * len(local_labels)
        correct += (output.argmax(1) == local_labels).sum().item()
        n += len(local_labels)
    return val_loss / n, correct / n


def main():
    prototypes = torch.randn(N_CLASS, 3, 16, 16)
    train_loader = DataLoader(ClipDataset(1280, prototypes, 1), batch_size=32, shuffle=True)
    val_loader = DataLoader(ClipDataset(320, prototypes, 2), batch_size=64)
    model = ConvLstm(latent_dim=64, hidden_size=64, lstm_layers=1, bidirectional=True, n_class=N_CLASS)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(5):
        train_loss, train_acc = train_model(model, train_loader, optimizer, criterion)
        val_loss, val_acc = test_model(model, val_loader, criterion)
        print("Epoch {}: train loss {:.4f} acc {:.3f} | val loss {:.4f} acc {:.3f}".format(epoch, train_loss, train_acc, val_loss, val_acc))


if __name__ == "__main__":
    main()
