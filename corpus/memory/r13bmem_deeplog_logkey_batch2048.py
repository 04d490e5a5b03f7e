"""DeepLog log-key anomaly detection model (LSTM over a sliding window of log keys, predicts
the next key), LogKeyModel_train.py adapted to our own system logs.

Our parser emits many more log keys than HDFS (templates keep some parameters), so
num_classes is the size of our key vocabulary. Sessions are generated here from a few
hundred workflows (chains of keys) with random detours, like the block sessions of HDFS.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

# Device configuration
device = torch.device("cpu")


def generate(num_sessions, num_keys, seed=0):
    rng = np.random.RandomState(seed)
    workflows = [rng.randint(0, num_keys, size=rng.randint(20, 40)) for _ in range(300)]
    inputs = []
    outputs = []
    for _ in range(num_sessions):
        flow = workflows[rng.randint(len(workflows))]
        line = [k if rng.rand() > 0.05 else rng.randint(num_keys) for k in flow]
        for i in range(len(line) - window_size):
            inputs.append(line[i:i + window_size])
            outputs.append(line[i + window_size])
    print('Number of sessions: {}'.format(num_sessions))
    print('Number of seqs: {}'.format(len(inputs)))
    dataset = TensorDataset(torch.tensor(inputs, dtype=torch.float), torch.tensor(outputs))
    return dataset


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_keys):
        super(Model, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_keys)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
        out, _ = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return out


if __name__ == '__main__':

    # Hyperparameters
    num_classes = 34000
    num_epochs = 3
    batch_size = 2048
    input_size = 1
    parser = argparse.ArgumentParser()
    parser.add_argument('-num_layers', default=2, type=int)
    parser.add_argument('-hidden_size', default=64, type=int)
    parser.add_argument('-window_size', default=10, type=int)
    args = parser.parse_args()
    num_layers = args.num_layers
    hidden_size = args.hidden_size
    window_size = args.window_size

    torch.manual_seed(0)
    model = Model(input_size, hidden_size, num_layers, num_classes).to(device)
    seq_dataset = generate(500, num_classes)
    dataloader = DataLoader(seq_dataset, batch_size=batch_size, shuffle=True)

    # Loss and optimizer
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters())

    # Train the model
    start_time = time.time()
    total_step = len(dataloader)
    for epoch in range(num_epochs):  # Loop over the dataset multiple times
        train_loss = 0
        for step, (seq, label) in enumerate(dataloader):
            # Forward pass
            seq = seq.clone().detach().view(-1, window_size, input_size).to(device)
            output = model(seq)
            loss = criterion(output, label.to(device))

            # Backward and optimize
            optimizer.zero_grad()
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            if step % 5 == 0:
                print('Epoch [{}/{}] step [{}/{}] loss: {:.4f}'.format(epoch + 1, num_epochs, step, total_step, loss.item()))
        print('Epoch [{}/{}], train_loss: {:.4f}'.format(epoch + 1, num_epochs, train_loss / total_step))
    elapsed_time = time.time() - start_time
    print('elapsed_time: {:.3f}s'.format(elapsed_time))
    print('Finished Training')
