#!/usr/bin/env python3
"""A bare-bones self-attention classifier (NakedAttention style): every 28x28 digit image is read
as a sequence of 784 pixels with one channel, each sample goes through single-head self-attention
(queries, keys and values from 1x1 weight matrices) and a linear output layer scores the 10 digits."""
import numpy as np
import torch

torch.manual_seed(46525)
np.random.seed(46525)

SEGMENTS = {
    0: 'abcdef', 1: 'bc', 2: 'abged', 3: 'abgcd', 4: 'fgbc',
    5: 'afgcd', 6: 'afgedc', 7: 'abc', 8: 'abcdefg', 9: 'abcdfg',
}


def draw_digit(digit, rng):
    img = np.zeros((28, 28), dtype=np.float32)
    top, left = 4 + rng.integers(-2, 3), 8 + rng.integers(-2, 3)
    h, w, t = 9, 10, 2
    boxes = {
        'a': (top, top + t, left, left + w), 'g': (top + h, top + h + t, left, left + w),
        'd': (top + 2 * h, top + 2 * h + t, left, left + w),
        'f': (top, top + h + t, left, left + t), 'b': (top, top + h + t, left + w - t, left + w),
        'e': (top + h, top + 2 * h + t, left, left + t), 'c': (top + h, top + 2 * h + t, left + w - t, left + w),
    }
    for s in SEGMENTS[digit]:
        r0, r1, c0, c1 = boxes[s]
        img[r0:r1, c0:c1] = rng.uniform(180, 255)
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).round()


def load_digits(seed=None, num=816):
    rng = np.random.default_rng(seed)
    ys = rng.integers(0, 10, num)
    xs = np.stack([draw_digit(int(d), rng) for d in ys])
    xs = torch.tensor(xs).reshape([num, 28**2, 1]).type(torch.float32)
    ys = torch.tensor(ys, dtype=torch.long)
    num_train = int(num * 5 / 6)
    js = torch.randperm(num, generator=torch.Generator().manual_seed(seed))
    js_train, js_val = js[:num_train], js[num_train:]
    return xs[js_train], ys[js_train], xs[js_val], ys[js_val]


class SelfAttentionModel(torch.nn.Module):
    def __init__(self, num_steps, num_channels, num_outputs, **kwargs):
        super().__init__(**kwargs)

        self.K = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)
        self.Q = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)
        self.V = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)

        self.softmax = torch.nn.Softmax(dim=1)

        self.out = torch.nn.Linear(num_steps*num_channels, num_outputs)

    def forward(self, x):

        batch_size, num_steps, num_channels = x.shape

        y = []
        for i in range(batch_size):

            x_i = x[i, :, :]

            x_k_i = torch.matmul(x_i, self.K)
            x_q_i = torch.matmul(x_i, self.Q)
            x_v_i = torch.matmul(x_i, self.V)

            w_i = self.softmax(torch.matmul(x_q_i, x_k_i.T)/num_channels**0.5)
            y_i = torch.matmul(w_i, x_v_i)

            y.append(y_i)
        y = torch.stack(y, axis=0)

        y_flat = y.reshape([batch_size, num_steps*num_channels])

        l = self.out(y_flat)

        return l


def accuracy(ps, ys):
    return (ps.argmax(dim=1) == ys).float().mean()


model = SelfAttentionModel(num_steps=28**2, num_channels=1, num_outputs=10)
probability = torch.nn.Softmax(dim=1)

loss = torch.nn.CrossEntropyLoss()

optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

xs_train, ys_train, xs_val, ys_val = load_digits(seed=46525)

dataset_train = torch.utils.data.TensorDataset(xs_train, ys_train)
sampler_train = torch.utils.data.RandomSampler(dataset_train, replacement=True)
loader_train = torch.utils.data.DataLoader(dataset=dataset_train, batch_size=16, sampler=sampler_train, drop_last=True)

i_better = -1
e_better = 1.0e8
a_better = 0.0
state_better = {}

for i in range(2):

    model.train()
    e_train = 0.0
    a_train = 0.0
    for j, (xs_batch, ys_batch) in enumerate(loader_train):
        ls_batch = model(xs_batch)
        ps_batch = probability(ls_batch)
        e_batch = loss(ls_batch, ys_batch)
        a_batch = accuracy(ps_batch, ys_batch)
        optimizer.zero_grad()
        e_batch.backward()
        optimizer.step()
        e_train += e_batch/len(loader_train)
        a_train += a_batch/len(loader_train)
        if j % 10 == 0:
            print('  i: {} batch: {} e_batch: {:.4f}'.format(i, j, e_batch.item()), flush=True)

    model.eval()
    with torch.no_grad():
        ls_val = model(xs_val)
        ps_val = probability(ls_val)
        e_val = loss(ls_val, ys_val)
        a_val = accuracy(ps_val, ys_val)
        if e_val < e_better:
            i_better = i
            e_better = e_val
            a_better = a_val
            state_better = model.state_dict()

    print(
        'i: '+str(i),
        'e_train: {:.5f}'.format(float(e_train)/0.693)+' bits',
        'a_train: {:.1f}'.format(100.0*float(a_train))+' %',
        'e_val: {:.5f}'.format(float(e_val)/0.693)+' bits',
        'a_val: {:.1f}'.format(100.0*float(a_val))+' %',
        sep='\t', flush=True
    )
