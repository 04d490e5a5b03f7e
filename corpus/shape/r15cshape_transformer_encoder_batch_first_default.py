"""Transformer encoder regression on short sensor windows (TorchLeet h3-style "build a
Transformer" exercise).

Each sample is a window of 10 scalar readings; the target is the peak reading of the window.
Linear embedding + learned positional embedding, a 2-layer nn.TransformerEncoder, mean pooling
over the window and a linear head, trained with MSELoss and Adam.
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(42)

seq_length = 10
input_dim = 1
embed_dim = 32
num_heads = 4
num_layers = 2
ff_dim = 64
output_dim = 1
batch_size = 32
num_epochs = 12
learning_rate = 1e-3


class PeakDataset(Dataset):
    def __init__(self, num_samples):
        self.X = torch.rand(num_samples, seq_length, input_dim)
        self.y = self.X.max(dim=1).values

    def __len__(self):
        return len(self.X)

    def __getitem__(self, idx):
        return self.X[idx], self.y[idx]


class TransformerModel(nn.Module):
    def __init__(self, input_dim, embed_dim, num_heads, num_layers, ff_dim, output_dim):
        super().__init__()
        self.embedding = nn.Linear(input_dim, embed_dim)
        self.positional_encoding = nn.Parameter(torch.randn(1, seq_length, embed_dim) * 0.1)
        encoder_layer = nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads,
                                                   dim_feedforward=ff_dim, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layer, num_layers=num_layers)
        self.output_layer = nn.Linear(embed_dim, output_dim)

    def forward(self, x):
        x = self.embedding(x) + self.positional_encoding
        x = self.transformer_encoder(x)
        x = x.mean(dim=1)
        return self.output_layer(x)


train_set = PeakDataset(1000)
test_set = PeakDataset(200)
train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
test_loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)

model = TransformerModel(input_dim, embed_dim, num_heads, num_layers, ff_dim, output_dim)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=learning_rate)

print(f"target variance (train): {train_set.y.var().item():.5f}")
for epoch in range(num_epochs):
    model.train()
    running = 0.0
    for X_batch, y_batch in train_loader:
        predictions = model(X_batch)
        loss = criterion(predictions, y_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item() * len(X_batch)

    model.eval()
    test_loss = 0.0
    with torch.no_grad():
        for X_batch, y_batch in test_loader:
            test_loss += criterion(model(X_batch), y_batch).item() * len(X_batch)
    print(f"Epoch [{epoch + 1}/{num_epochs}], Train MSE: {running / len(train_set):.5f}, "
          f"Test MSE: {test_loss / len(test_set):.5f}")

model.eval()
with torch.no_grad():
    X_show, y_show = test_set[:5]
    print("peak  :", [round(v, 3) for v in y_show.view(-1).tolist()])
    print("pred  :", [round(v, 3) for v in model(X_show).view(-1).tolist()])
