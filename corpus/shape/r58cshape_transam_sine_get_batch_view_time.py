"""Single-step time series forecasting with a transformer encoder (TransAm).

Toy signal: a sum of sines with a little noise, min-max scaled to [-1, 1]. Every
training pair is a window of `input_window` values and the same window shifted by
one step; the encoder runs with a causal mask and predicts the next value at every
position.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

# S is the source sequence length
# N is the batch size
# E is the feature number

input_window = 48  # number of input steps
output_window = 1  # number of prediction steps, in this model its fixed to one
block_len = input_window + output_window  # for one input-output pair
batch_size = 16
train_size = 0.8
device = torch.device("cpu")


class PositionalEncoding(nn.Module):

    def __init__(self, d_model, max_len=5000):
        super(PositionalEncoding, self).__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)  # [5000, 1, d_model], so need seq-len <= 5000
        self.register_buffer('pe', pe)

    def forward(self, x):
        return x + self.pe[:x.size(0), :].repeat(1, x.shape[1], 1)


class TransAm(nn.Module):
    def __init__(self, feature_size=64, num_layers=1, dropout=0.1):
        super(TransAm, self).__init__()
        self.model_type = 'Transformer'
        self.input_embedding = nn.Linear(1, feature_size)
        self.src_mask = None

        self.pos_encoder = PositionalEncoding(feature_size)
        self.encoder_layer = nn.TransformerEncoderLayer(d_model=feature_size, nhead=8, dim_feedforward=256,
                                                        dropout=dropout)
        self.transformer_encoder = nn.TransformerEncoder(self.encoder_layer, num_layers=num_layers,
                                                         enable_nested_tensor=False)
        self.decoder = nn.Linear(feature_size, 1)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src):
        # src with shape (input_window, batch_len, 1)
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
            self.src_mask = mask

        src = self.input_embedding(src)  # linear transformation before positional embedding
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return output

    def _generate_square_subsequent_mask(self, sz):
        mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
        mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
        return mask


# if window is 48 and prediction step is 1
# in -> [0..47]
# target -> [1..48]
def create_inout_sequences(input_data, input_window, output_window):
    inout_seq = []
    L = len(input_data)
    block_num = L - block_len + 1
    for i in range(block_num):
        train_seq = input_data[i: i + input_window]
        train_label = input_data[i + output_window: i + input_window + output_window]
        inout_seq.append((train_seq, train_label))
    return torch.FloatTensor(np.array(inout_seq))


def get_data():
    # construct a little toy dataset
    time_ = np.arange(0, 400, 0.5)
    amplitude = np.sin(time_) + np.sin(time_ * 0.05) + \
        np.sin(time_ * 0.12) * np.random.normal(-0.2, 0.05, len(time_))

    # looks like normalizing input values crucial for the model
    lo, hi = amplitude.min(), amplitude.max()
    amplitude = 2 * (amplitude - lo) / (hi - lo) - 1

    sampels = int(len(time_) * train_size)
    train_data = amplitude[:sampels]
    test_data = amplitude[sampels:]

    train_sequence = create_inout_sequences(train_data, input_window, output_window)
    test_data = create_inout_sequences(test_data, input_window, output_window)
    # shape with (block, sql_len, 2)
    return train_sequence.to(device), test_data.to(device)


def get_batch(input_data, i, batch_size):
    batch_len = min(batch_size, len(input_data) - i)
    data = input_data[i:i + batch_len]
    input = torch.stack([item[0] for item in data]).view((input_window, batch_len, 1))
    # ( seq_len, batch, 1 ) , 1 is feature size
    target = torch.stack([item[1] for item in data]).view((input_window, batch_len, 1))
    return input, target


def train(train_data):
    global step
    model.train()  # Turn on the train mode \o/
    total_loss = 0.
    start_time = time.time()
    perm = torch.randperm(len(train_data))
    train_data = train_data[perm]
    log_interval = int(len(train_data) / batch_size / 4)

    for batch, i in enumerate(range(0, len(train_data), batch_size)):
        # data and target are the same shape with (input_window,batch_len,1)
        data, targets = get_batch(train_data, i, batch_size)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.7)
        optimizer.step()
        step += 1

        total_loss += loss.item()
        if batch % log_interval == 0 and batch > 0:
            cur_loss = total_loss / log_interval
            elapsed = time.time() - start_time
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.6f} | {:5.2f} ms | loss {:5.5f}'.format(
                epoch, batch, len(train_data) // batch_size, scheduler.get_last_lr()[0],
                elapsed * 1000 / log_interval, cur_loss))
            total_loss = 0
            start_time = time.time()


def one_step_forecast(eval_model, data_source):
    # walk over the test series one window at a time and keep the last prediction (what gets plotted)
    eval_model.eval()
    total_loss = 0.
    test_result = []
    truth = []
    with torch.no_grad():
        for i in range(len(data_source)):
            data, target = get_batch(data_source, i, 1)  # one-step forecast
            output = eval_model(data)
            total_loss += criterion(output, target).item()
            test_result.append(output[-1].view(-1))
            truth.append(target[-1].view(-1))
    test_result, truth = torch.cat(test_result), torch.cat(truth)
    last_step_mse = torch.mean((test_result - truth) ** 2).item()
    return total_loss / len(data_source), last_step_mse


def evaluate(eval_model, data_source):
    eval_model.eval()  # Turn on the evaluation mode
    total_loss = 0.
    eval_batch_size = 1000
    with torch.no_grad():
        for i in range(0, len(data_source), eval_batch_size):
            data, targets = get_batch(data_source, i, eval_batch_size)
            output = eval_model(data)
            total_loss += len(data[0]) * criterion(output, targets).cpu().item()
    return total_loss / len(data_source)


train_data, val_data = get_data()
model = TransAm().to(device)

criterion = nn.MSELoss()
lr = 0.002
optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.95)

# persistence baseline on the test windows: predict x[t+1] = x[t]
persist = torch.mean((val_data[:, 0, -1] - val_data[:, 1, -1]) ** 2).item()
print('train windows %d, test windows %d, persistence one-step mse %.5f' % (len(train_data), len(val_data), persist))

epochs = 5
step = 0
for epoch in range(1, epochs + 1):
    epoch_start_time = time.time()
    train(train_data)
    val_loss = evaluate(model, val_data)
    print('-' * 89)
    print('| end of epoch {:3d} | time: {:5.2f}s | steps {:4d} | valid loss {:5.5f}'.format(
        epoch, (time.time() - epoch_start_time), step, val_loss))
    print('-' * 89)
    scheduler.step()

window_loss, next_value_mse = one_step_forecast(model, val_data)
print('one-step forecast on the test series: window loss %.5f, next-value mse %.5f (persistence %.5f)'
      % (window_loss, next_value_mse, persist))
