"""Sparsely-gated mixture of experts (noisy top-k gating, Shazeer et al. 2017) on a tabular
risk-tier classification task. The tier of a client follows a different rule in each of
four market segments, so a gate that routes each row to the right experts helps.
Experts return log-probabilities; the layer mixes them and the loss is the NLL of the
mixture plus the load-balancing (importance + load) loss."""
import torch
import torch.nn as nn
from torch.distributions.normal import Normal
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset
import numpy as np


class MLP(nn.Module):
    def __init__(self, input_size, output_size, hidden_size):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)
        self.relu = nn.ReLU()
        self.log_soft = nn.LogSoftmax(1)

    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        out = self.log_soft(out)
        return out


class SparseDispatcher(object):
    """Sends each row to the experts whose gate is nonzero and sums their outputs back,
    weighted by the gates."""

    def __init__(self, num_experts, gates):
        self._gates = gates
        self._num_experts = num_experts
        # sort experts
        sorted_experts, index_sorted_experts = torch.nonzero(gates).sort(0)
        # drop indices
        _, self._expert_index = sorted_experts.split(1, dim=1)
        # get according batch index for each expert
        self._batch_index = torch.nonzero(gates)[index_sorted_experts[:, 1], 0]
        # calculate num samples that each expert gets
        self._part_sizes = (gates > 0).sum(0).tolist()
        # expand gates to match with self._batch_index
        gates_exp = gates[self._batch_index.flatten()]
        self._nonzero_gates = torch.gather(gates_exp, 1, self._expert_index)

    def dispatch(self, inp):
        # expand according to batch index so we can just split by _part_sizes
        inp_exp = inp[self._batch_index].squeeze(1)
        return torch.split(inp_exp, self._part_sizes, dim=0)

    def combine(self, expert_out, multiply_by_gates=True):
        # apply exp to expert outputs, so we are not longer in log space
        stitched = torch.cat(expert_out, 0).exp()

        if multiply_by_gates:
            stitched = stitched.mul(self._nonzero_gates)
        zeros = torch.zeros(self._gates.size(0), expert_out[-1].size(1), requires_grad=True, device=stitched.device)
        # combine samples that have been processed by the same k experts
        combined = zeros.index_add(0, self._batch_index, stitched.float())
        # add eps to all zero values in order to avoid nans when going back to log space
        combined[combined == 0] = np.finfo(float).eps
        # back to log space
        return combined.log()

    def expert_to_gates(self):
        # split nonzero gates for each expert
        return torch.split(self._nonzero_gates, self._part_sizes, dim=0)


class MoE(nn.Module):
    def __init__(self, input_size, output_size, num_experts, hidden_size, noisy_gating=True, k=4):
        super(MoE, self).__init__()
        self.noisy_gating = noisy_gating
        self.num_experts = num_experts
        self.output_size = output_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.k = k
        # instantiate experts
        self.experts = nn.ModuleList([MLP(self.input_size, self.output_size, self.hidden_size) for i in range(self.num_experts)])
        self.w_gate = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)
        self.w_noise = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)

        self.softplus = nn.Softplus()
        self.softmax = nn.Softmax(1)
        self.register_buffer("mean", torch.tensor([0.0]))
        self.register_buffer("std", torch.tensor([1.0]))
        assert(self.k <= self.num_experts)

    def cv_squared(self, x):
        """The squared coefficient of variation of a sample (0 for a single expert)."""
        eps = 1e-10
        if x.shape[0] == 1:
            return torch.tensor([0], device=x.device, dtype=x.dtype)
        return x.float().var() / (x.float().mean()**2 + eps)

    def _gates_to_load(self, gates):
        return (gates > 0).sum(0)

    def _prob_in_top_k(self, clean_values, noisy_values, noise_stddev, noisy_top_values):
        """Probability that each value is in the top k under fresh noise; lets the load
        loss backpropagate into the gate."""
        batch = clean_values.size(0)
        m = noisy_top_values.size(1)
        top_values_flat = noisy_top_values.flatten()

        threshold_positions_if_in = torch.arange(batch, device=clean_values.device) * m + self.k
        threshold_if_in = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_in), 1)
        is_in = torch.gt(noisy_values, threshold_if_in)
        threshold_positions_if_out = threshold_positions_if_in - 1
        threshold_if_out = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_out), 1)
        # is each value currently in the top k.
        normal = Normal(self.mean, self.std)
        prob_if_in = normal.cdf((clean_values - threshold_if_in)/noise_stddev)
        prob_if_out = normal.cdf((clean_values - threshold_if_out)/noise_stddev)
        prob = torch.where(is_in, prob_if_in, prob_if_out)
        return prob

    def noisy_top_k_gating(self, x, train, noise_epsilon=1e-2):
        clean_logits = x @ self.w_gate
        if self.noisy_gating and train:
            raw_noise_stddev = x @ self.w_noise
            noise_stddev = ((self.softplus(raw_noise_stddev) + noise_epsilon))
            noisy_logits = clean_logits + (torch.randn_like(clean_logits) * noise_stddev)
            logits = noisy_logits
        else:
            logits = clean_logits

        # calculate topk + 1 that will be needed for the noisy gates
        top_logits, top_indices = logits.topk(min(self.k + 1, self.num_experts), dim=1)
        top_k_logits = top_logits[:, :self.k]
        top_k_indices = top_indices[:, :self.k]
        top_k_gates = self.softmax(top_k_logits)

        zeros = torch.zeros_like(logits, requires_grad=True)
        gates = zeros.scatter(1, top_k_indices, top_k_gates)

        if self.noisy_gating and self.k < self.num_experts and train:
            load = (self._prob_in_top_k(clean_logits, noisy_logits, noise_stddev, top_logits)).sum(0)
        else:
            load = self._gates_to_load(gates)
        return gates, load

    def forward(self, x, loss_coef=1e-2):
        gates, load = self.noisy_top_k_gating(x, self.training)
        # calculate importance loss
        importance = gates.sum(0)
        #
        loss = self.cv_squared(importance) + self.cv_squared(load)
        loss *= loss_coef

        dispatcher = SparseDispatcher(self.num_experts, gates)
        expert_inputs = dispatcher.dispatch(x)
        gates = dispatcher.expert_to_gates()
        expert_outputs = [self.experts[i](expert_inputs[i]) for i in range(self.num_experts)]
        y = dispatcher.combine(expert_outputs)
        return y, loss


def make_risk_table(n, n_features, num_classes, gen):
    """Rows of client features; columns 0-1 pick one of four segments, and in each segment
    the tier is the argmax of a different linear score of the other columns."""
    x = torch.randn(n, n_features, generator=gen)
    segment = (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long()
    rules = torch.randn(4, n_features - 2, num_classes, generator=gen)
    scores = torch.einsum('nf,nfc->nc', x[:, 2:], rules[segment])
    y = scores.argmax(1)
    # segment indicators as the dataset ships them (one-hot market segment columns)
    seg_onehot = nn.functional.one_hot(segment, 4).float()
    return torch.cat([x, seg_onehot], 1), y


def train(x, y, model, loss_fn, optim):
    # model returns the prediction and the loss that encourages all experts to have equal importance and load
    y_hat, aux_loss = model(x.float())
    # calculate prediction loss
    loss = loss_fn(y_hat, y)
    # combine losses
    total_loss = loss + aux_loss
    optim.zero_grad()
    total_loss.backward()
    optim.step()
    return loss.item(), aux_loss.item()


@torch.no_grad()
def evaluate(loader, model, loss_fn):
    model.eval()
    total, correct, nll = 0, 0, 0.0
    load = torch.zeros(model.num_experts)
    for x, y in loader:
        y_hat, aux_loss = model(x.float())
        nll += loss_fn(y_hat, y).item() * len(y)
        correct += (y_hat.argmax(1) == y).sum().item()
        total += len(y)
        gates, _ = model.noisy_top_k_gating(x.float(), False)
        load += (gates > 0).sum(0)
    model.train()
    return nll / total, correct / total, load


torch.manual_seed(0)
gen = torch.Generator().manual_seed(42)

# arguments
n_features = 12
num_classes = 5
input_size = n_features + 4
num_experts = 8
hidden_size = 64
batch_size = 64
k = 2
epochs = 5

x_all, y_all = make_risk_table(3200, n_features, num_classes, gen)
train_ds = TensorDataset(x_all[:2560], y_all[:2560])
valid_ds = TensorDataset(x_all[2560:], y_all[2560:])
train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, drop_last=True)
valid_loader = DataLoader(valid_ds, batch_size=256)

# instantiate the MoE layer
model = MoE(input_size, num_classes, num_experts, hidden_size, k=k, noisy_gating=True)
loss_fn = nn.NLLLoss()
optim = Adam(model.parameters(), lr=5e-3)

val_nll, val_acc, load = evaluate(valid_loader, model, loss_fn)
print("Before training - valid nll: {:.3f}, acc: {:.3f}, experts used: {}".format(
    val_nll, val_acc, load.long().tolist()))
step = 0
for epoch in range(1, epochs + 1):
    running, running_aux, n = 0.0, 0.0, 0
    for x, y in train_loader:
        loss, aux = train(x, y, model, loss_fn, optim)
        running += loss
        running_aux += aux
        n += 1
        if step % 20 == 0:
            print("step {:4d} - loss: {:.3f}, aux_loss: {:.4f}".format(step, loss, aux))
        step += 1
    val_nll, val_acc, load = evaluate(valid_loader, model, loss_fn)
    print("Epoch {} - train loss: {:.3f}, aux_loss: {:.4f} | valid nll: {:.3f}, acc: {:.3f}, experts used: {}".format(
        epoch, running / n, running_aux / n, val_nll, val_acc, load.long().tolist()))
