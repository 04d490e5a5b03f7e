"""ConvLSTM encoder-forecaster for next-frame prediction on synthetic moving blobs.

Three encoder stages (conv subnet + CLSTM_cell) hand their final (h, c) states to three
forecaster stages that unroll from no input, deconvolve back to the frame size and predict the
next frames; MSE loss, Adam, clip_grad_value_, ReduceLROnPlateau on the validation loss.
"""
from collections import OrderedDict

import numpy as np
import torch
from torch import nn
from torch.optim import lr_scheduler
import torch.optim as optim

random_seed = 1996
np.random.seed(random_seed)
torch.manual_seed(random_seed)

batch_size = 8
lr = 1e-3
frames_input = 3
frames_output = 3
epochs = 12
H = W = 12


def make_layers(block):
    layers = []
    for layer_name, v in block.items():
        if 'deconv' in layer_name:
            layers.append((layer_name, nn.ConvTranspose2d(v[0], v[1], v[2], v[3], v[4])))
        else:
            layers.append((layer_name, nn.Conv2d(v[0], v[1], v[2], v[3], v[4])))
        if 'leaky' in layer_name:
            layers.append(('leaky_' + layer_name, nn.LeakyReLU(negative_slope=0.2, inplace=True)))
    return nn.Sequential(OrderedDict(layers))


class CLSTM_cell(nn.Module):
    def __init__(self, shape, input_channels, filter_size, num_features):
        super().__init__()
        self.shape = shape
        self.input_channels = input_channels
        self.filter_size = filter_size
        self.num_features = num_features
        self.padding = (filter_size - 1) // 2
        self.conv = nn.Sequential(
            nn.Conv2d(self.input_channels + self.num_features, 4 * self.num_features,
                      self.filter_size, 1, self.padding),
            nn.GroupNorm(4 * self.num_features // 32, 4 * self.num_features))

    def forward(self, inputs=None, hidden_state=None, seq_len=10):
        if hidden_state is None:
            hx = torch.zeros(inputs.size(1), self.num_features, self.shape[0], self.shape[1])
            cx = torch.zeros(inputs.size(1), self.num_features, self.shape[0], self.shape[1])
        else:
            hx, cx = hidden_state
        output_inner = []
        for index in range(seq_len):
            if inputs is None:
                x = torch.zeros(hx.size(0), self.input_channels, self.shape[0], self.shape[1])
            else:
                x = inputs[index, ...]
            combined = torch.cat((x, hx), 1)
            gates = self.conv(combined)
            ingate, forgetgate, cellgate, outgate = torch.split(gates, self.num_features, dim=1)
            ingate = torch.sigmoid(ingate)
            forgetgate = torch.sigmoid(forgetgate)
            cellgate = torch.tanh(cellgate)
            outgate = torch.sigmoid(outgate)
            cy = (forgetgate * cx) + (ingate * cellgate)
            hy = outgate * torch.tanh(cy)
            output_inner.append(hy)
            hx = hy
            cx = cy
        return torch.stack(output_inner), (hy, cy)


class Encoder(nn.Module):
    def __init__(self, subnets, rnns):
        super().__init__()
        self.blocks = len(subnets)
        for index, (params, rnn) in enumerate(zip(subnets, rnns), 1):
            setattr(self, 'stage' + str(index), make_layers(params))
            setattr(self, 'rnn' + str(index), rnn)

    def forward_by_stage(self, inputs, subnet, rnn):
        seq_number, batch_size, input_channel, height, width = inputs.size()
        inputs = torch.reshape(inputs, (-1, input_channel, height, width))
        inputs = subnet(inputs)
        inputs = torch.reshape(inputs, (seq_number, batch_size, inputs.size(1),
                                        inputs.size(2), inputs.size(3)))
        outputs_stage, state_stage = rnn(inputs, None, seq_len=seq_number)
        return outputs_stage, state_stage

    def forward(self, inputs):
        inputs = inputs.transpose(0, 1)
        hidden_states = []
        for i in range(1, self.blocks + 1):
            inputs, state_stage = self.forward_by_stage(
                inputs, getattr(self, 'stage' + str(i)), getattr(self, 'rnn' + str(i)))
            hidden_states.append(state_stage)
        return tuple(hidden_states)


class Decoder(nn.Module):
    def __init__(self, subnets, rnns):
        super().__init__()
        self.blocks = len(subnets)
        for index, (params, rnn) in enumerate(zip(subnets, rnns)):
            setattr(self, 'rnn' + str(self.blocks - index), rnn)
            setattr(self, 'stage' + str(self.blocks - index), make_layers(params))

    def forward_by_stage(self, inputs, state, subnet, rnn):
        inputs, state_stage = rnn(inputs, state, seq_len=frames_output)
        seq_number, batch_size, input_channel, height, width = inputs.size()
        inputs = torch.reshape(inputs, (-1, input_channel, height, width))
        inputs = subnet(inputs)
        inputs = torch.reshape(inputs, (seq_number, batch_size, inputs.size(1),
                                        inputs.size(2), inputs.size(3)))
        return inputs

    def forward(self, hidden_states):
        inputs = self.forward_by_stage(None, hidden_states[-1], self.stage3, self.rnn3)
        for i in list(range(1, self.blocks))[::-1]:
            inputs = self.forward_by_stage(inputs, hidden_states[i - 1],
                                           getattr(self, 'stage' + str(i)),
                                           getattr(self, 'rnn' + str(i)))
        return inputs.transpose(0, 1)


class ED(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, input):
        state = self.encoder(input)
        output = self.decoder(state)
        return output


convlstm_encoder_params = [
    [
        OrderedDict({'conv1_leaky_1': [1, 8, 3, 1, 1]}),
        OrderedDict({'conv2_leaky_1': [16, 16, 3, 2, 1]}),
        OrderedDict({'conv3_leaky_1': [16, 16, 3, 2, 1]}),
    ],
    [
        CLSTM_cell(shape=(12, 12), input_channels=8, filter_size=3, num_features=16),
        CLSTM_cell(shape=(6, 6), input_channels=16, filter_size=3, num_features=16),
        CLSTM_cell(shape=(3, 3), input_channels=16, filter_size=3, num_features=16),
    ],
]

convlstm_decoder_params = [
    [
        OrderedDict({'deconv1_leaky_1': [16, 16, 4, 2, 1]}),
        OrderedDict({'deconv2_leaky_1': [16, 16, 4, 2, 1]}),
        OrderedDict({
            'conv3_leaky_1': [16, 8, 3, 1, 1],
            'conv4_leaky_1': [8, 1, 1, 1, 0],
        }),
    ],
    [
        CLSTM_cell(shape=(3, 3), input_channels=16, filter_size=3, num_features=16),
        CLSTM_cell(shape=(6, 6), input_channels=16, filter_size=3, num_features=16),
        CLSTM_cell(shape=(12, 12), input_channels=16, filter_size=3, num_features=16),
    ],
]


class MovingBlobs(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        total = frames_input + frames_output
        yy, xx = np.mgrid[0:H, 0:W]
        self.data = np.zeros((n, total, 1, H, W), dtype=np.float32)
        for k in range(n):
            pos = rng.uniform(3, H - 3, size=2)
            vel = rng.uniform(-1.2, 1.2, size=2)
            for t in range(total):
                for d in range(2):
                    if pos[d] + vel[d] < 2 or pos[d] + vel[d] > H - 3:
                        vel[d] = -vel[d]
                    pos[d] += vel[d]
                self.data[k, t, 0] = np.exp(-((yy - pos[0]) ** 2 + (xx - pos[1]) ** 2) / 3.0)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        seq = torch.from_numpy(self.data[idx])
        return idx, seq[frames_input:], seq[:frames_input]


def train():
    trainFolder = MovingBlobs(80, seed=0)
    validFolder = MovingBlobs(32, seed=1)
    trainLoader = torch.utils.data.DataLoader(trainFolder, batch_size=batch_size, shuffle=False)
    validLoader = torch.utils.data.DataLoader(validFolder, batch_size=batch_size, shuffle=False)

    encoder = Encoder(convlstm_encoder_params[0], convlstm_encoder_params[1])
    decoder = Decoder(convlstm_decoder_params[0], convlstm_decoder_params[1])
    net = ED(encoder, decoder)

    lossfunction = nn.MSELoss()
    optimizer = optim.Adam(net.parameters(), lr=lr)
    pla_lr_scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=4)

    copy_last = np.average([lossfunction(inputVar[:, -1:].expand_as(targetVar), targetVar).item()
                            for _, targetVar, inputVar in validLoader])
    print(f'copy-last-frame valid_loss: {copy_last:.6f}')

    for epoch in range(epochs):
        train_losses, valid_losses = [], []
        net.train()
        for i, (idx, targetVar, inputVar) in enumerate(trainLoader):
            optimizer.zero_grad()
            pred = net(inputVar)
            loss = lossfunction(pred, targetVar)
            train_losses.append(loss.item())
            loss.backward()
            torch.nn.utils.clip_grad_value_(net.parameters(), clip_value=10.0)
            optimizer.step()
        with torch.no_grad():
            net.eval()
            for i, (idx, targetVar, inputVar) in enumerate(validLoader):
                pred = net(inputVar)
                valid_losses.append(lossfunction(pred, targetVar).item())
        train_loss = np.average(train_losses)
        valid_loss = np.average(valid_losses)
        print(f'[{epoch:>2}/{epochs}] train_loss: {train_loss:.6f} valid_loss: {valid_loss:.6f}')
        pla_lr_scheduler.step(valid_loss)


if __name__ == "__main__":
    train()
