"""Surrogate-gradient training of a two-layer spiking network (SpyTorch tutorial 2 style).

Input "images" (8x8, 4 classes of noisy strokes) are turned into a spike-latency code,
fed to a layer of current-based LIF neurons with a Heaviside spike nonlinearity whose
backward pass is the SuperSpike fast-sigmoid surrogate, and read out by a layer of
non-spiking leaky integrators (max over time -> log_softmax -> NLL).
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(1)
np.random.seed(1)

dtype = torch.float
device = torch.device("cpu")

nb_inputs = 8 * 8
nb_hidden = 64
nb_outputs = 4

time_step = 1e-3
nb_steps = 60
batch_size = 128


def make_dataset(n, seed):
    rng = np.random.RandomState(seed)
    protos = np.zeros((nb_outputs, 8, 8))
    protos[0, 2, :] = 1.0          # horizontal bar
    protos[1, :, 5] = 1.0          # vertical bar
    protos[2, np.arange(8), np.arange(8)] = 1.0          # diagonal
    protos[3, np.arange(8), 7 - np.arange(8)] = 1.0      # anti-diagonal
    y = rng.randint(0, nb_outputs, size=n)
    x = protos[y] * rng.uniform(0.6, 1.0, size=(n, 1, 1)) + rng.uniform(0, 0.35, size=(n, 8, 8))
    return np.clip(x.reshape(n, -1), 0, 1), y


x_train, y_train = make_dataset(1536, seed=10)
x_test, y_test = make_dataset(384, seed=11)


def current2firing_time(x, tau=20, thr=0.2, tmax=1.0, epsilon=1e-7):
    idx = x < thr
    x = np.clip(x, thr + epsilon, 1e9)
    T = tau * np.log(x / (x - thr))
    T[idx] = tmax
    return T


def spike_data_generator(X, y, batch_size, nb_steps, nb_units, shuffle=True):
    labels_ = np.array(y, dtype=np.int64)
    number_of_batches = len(X) // batch_size
    sample_index = np.arange(len(X))
    tau_eff = 20e-3 / time_step
    firing_times = np.array(current2firing_time(X, tau=tau_eff, tmax=nb_steps), dtype=np.int64)
    if shuffle:
        np.random.shuffle(sample_index)
    for counter in range(number_of_batches):
        batch_index = sample_index[batch_size * counter:batch_size * (counter + 1)]
        X_batch = torch.zeros((batch_size, nb_steps, nb_units), dtype=dtype)
        ft = torch.from_numpy(firing_times[batch_index])
        b, u = torch.nonzero(ft < nb_steps, as_tuple=True)
        X_batch[b, ft[b, u], u] = 1.0
        yield X_batch.to(device), torch.from_numpy(labels_[batch_index]).to(device)


tau_mem = 10e-3
tau_syn = 5e-3
alpha = float(np.exp(-time_step / tau_syn))
beta = float(np.exp(-time_step / tau_mem))

weight_scale = 7 * (1.0 - beta)
w1 = torch.empty((nb_inputs, nb_hidden), device=device, dtype=dtype, requires_grad=True)
torch.nn.init.normal_(w1, mean=0.0, std=weight_scale / np.sqrt(nb_inputs))
w2 = torch.empty((nb_hidden, nb_outputs), device=device, dtype=dtype, requires_grad=True)
torch.nn.init.normal_(w2, mean=0.0, std=weight_scale / np.sqrt(nb_hidden))


class SurrGradSpike(torch.autograd.Function):
    scale = 100.0

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        out = torch.zeros_like(input)
        out[input > 0] = 1.0
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad = grad_input / (SurrGradSpike.scale * torch.abs(input) + 1.0) ** 2
        return grad


spike_fn = SurrGradSpike.apply


def run_snn(inputs):
    h1 = torch.einsum("abc,cd->abd", (inputs, w1))
    syn = torch.zeros((inputs.shape[0], nb_hidden), device=device, dtype=dtype)
    mem = torch.zeros((inputs.shape[0], nb_hidden), device=device, dtype=dtype)

    mem_rec = []
    spk_rec = []
    for t in range(nb_steps):
        mthr = mem - 1.0
        out = spike_fn(mthr)
        rst = out.detach()

        new_syn = alpha * syn + h1[:, t]
        new_mem = (beta * mem + syn) * (1.0 - rst)

        mem_rec.append(mem)
        spk_rec.append(out)
        mem = new_mem
        syn = new_syn

    mem_rec = torch.stack(mem_rec, dim=1)
    spk_rec = torch.stack(spk_rec, dim=1)

    h2 = torch.einsum("abc,cd->abd", (spk_rec, w2))
    flt = torch.zeros((inputs.shape[0], nb_outputs), device=device, dtype=dtype)
    out = torch.zeros((inputs.shape[0], nb_outputs), device=device, dtype=dtype)
    out_rec = [out]
    for t in range(nb_steps):
        new_flt = alpha * flt + h2[:, t]
        new_out = beta * out + flt
        flt = new_flt
        out = new_out
        out_rec.append(out)
    out_rec = torch.stack(out_rec, dim=1)
    return out_rec, (mem_rec, spk_rec)


def compute_classification_accuracy(x_data, y_data):
    accs = []
    with torch.no_grad():
        for x_local, y_local in spike_data_generator(x_data, y_data, batch_size, nb_steps, nb_inputs, shuffle=False):
            output, _ = run_snn(x_local)
            m, _ = torch.max(output, 1)
            _, am = torch.max(m, 1)
            accs.append(np.mean((y_local == am).numpy()))
    return np.mean(accs)


params = [w1, w2]
optimizer = torch.optim.Adam(params, lr=2e-3, betas=(0.9, 0.999))
log_softmax_fn = nn.LogSoftmax(dim=1)
loss_fn = nn.NLLLoss()

print(f"init test accuracy: {compute_classification_accuracy(x_test, y_test):.3f}")
nb_epochs = 4
for e in range(nb_epochs):
    local_loss = []
    for x_local, y_local in spike_data_generator(x_train, y_train, batch_size, nb_steps, nb_inputs):
        output, recs = run_snn(x_local)
        _, spks = recs
        m, _ = torch.max(output, 1)
        log_p_y = log_softmax_fn(m)

        reg_loss = 1e-5 * torch.sum(spks)
        reg_loss += 1e-5 * torch.mean(torch.sum(torch.sum(spks, dim=0), dim=0) ** 2)

        loss_val = loss_fn(log_p_y, y_local) + reg_loss

        optimizer.zero_grad()
        loss_val.backward()
        optimizer.step()
        local_loss.append(loss_val.item())
    rate = spks.mean().item() / time_step
    print(f"Epoch {e + 1}: loss={np.mean(local_loss):.5f}  hidden rate={rate:.1f} Hz  "
          f"train acc={compute_classification_accuracy(x_train[:256], y_train[:256]):.3f}  "
          f"test acc={compute_classification_accuracy(x_test, y_test):.3f}")
