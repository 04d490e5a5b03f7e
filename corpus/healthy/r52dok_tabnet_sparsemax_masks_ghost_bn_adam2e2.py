"""TabNet classifier (dreamquark-ai pytorch_tabnet style) on a synthetic tabular task:
sequential attentive feature selection with sparsemax masks, ghost batch norm, GLU blocks."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)


def _make_ix_like(input, dim=0):
    d = input.size(dim)
    rho = torch.arange(1, d + 1, device=input.device, dtype=input.dtype)
    view = [1] * input.dim()
    view[0] = -1
    return rho.view(view).transpose(0, dim)


class SparsemaxFunction(Function):
    @staticmethod
    def forward(ctx, input, dim=-1):
        ctx.dim = dim
        max_val, _ = input.max(dim=dim, keepdim=True)
        input = input - max_val
        tau, supp_size = SparsemaxFunction._threshold_and_support(input, dim=dim)
        output = torch.clamp(input - tau, min=0)
        ctx.save_for_backward(supp_size, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        supp_size, output = ctx.saved_tensors
        dim = ctx.dim
        grad_input = grad_output.clone()
        grad_input[output == 0] = 0
        v_hat = grad_input.sum(dim=dim) / supp_size.to(output.dtype).squeeze()
        v_hat = v_hat.unsqueeze(dim)
        grad_input = torch.where(output != 0, grad_input - v_hat, grad_input)
        return grad_input, None

    @staticmethod
    def _threshold_and_support(input, dim=-1):
        input_srt, _ = torch.sort(input, descending=True, dim=dim)
        input_cumsum = input_srt.cumsum(dim) - 1
        rhos = _make_ix_like(input, dim)
        support = rhos * input_srt > input_cumsum
        support_size = support.sum(dim=dim).unsqueeze(dim)
        tau = input_cumsum.gather(dim, support_size - 1)
        tau /= support_size.to(input.dtype)
        return tau, support_size


sparsemax = SparsemaxFunction.apply


def initialize_non_glu(module, input_dim, output_dim):
    gain_value = np.sqrt((input_dim + output_dim) / np.sqrt(4 * input_dim))
    torch.nn.init.xavier_normal_(module.weight, gain=gain_value)


def initialize_glu(module, input_dim, output_dim):
    gain_value = np.sqrt((input_dim + output_dim) / np.sqrt(input_dim))
    torch.nn.init.xavier_normal_(module.weight, gain=gain_value)


class GBN(nn.Module):
    def __init__(self, input_dim, virtual_batch_size=128, momentum=0.01):
        super().__init__()
        self.virtual_batch_size = virtual_batch_size
        self.bn = nn.BatchNorm1d(input_dim, momentum=momentum)

    def forward(self, x):
        chunks = x.chunk(int(np.ceil(x.shape[0] / self.virtual_batch_size)), 0)
        res = [self.bn(x_) for x_ in chunks]
        return torch.cat(res, dim=0)


class GLU_Layer(nn.Module):
    def __init__(self, input_dim, output_dim, fc=None, virtual_batch_size=128, momentum=0.02):
        super().__init__()
        self.output_dim = output_dim
        if fc:
            self.fc = fc
        else:
            self.fc = nn.Linear(input_dim, 2 * output_dim, bias=False)
        initialize_glu(self.fc, input_dim, 2 * output_dim)
        self.bn = GBN(2 * output_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, x):
        x = self.fc(x)
        x = self.bn(x)
        return torch.mul(x[:, : self.output_dim], torch.sigmoid(x[:, self.output_dim:]))


class GLU_Block(nn.Module):
    def __init__(self, input_dim, output_dim, n_glu=2, first=False, shared_layers=None,
                 virtual_batch_size=128, momentum=0.02):
        super().__init__()
        self.first = first
        self.shared_layers = shared_layers
        self.n_glu = n_glu
        self.glu_layers = nn.ModuleList()
        params = {"virtual_batch_size": virtual_batch_size, "momentum": momentum}
        fc = shared_layers[0] if shared_layers else None
        self.glu_layers.append(GLU_Layer(input_dim, output_dim, fc=fc, **params))
        for glu_id in range(1, self.n_glu):
            fc = shared_layers[glu_id] if shared_layers else None
            self.glu_layers.append(GLU_Layer(output_dim, output_dim, fc=fc, **params))

    def forward(self, x):
        scale = torch.sqrt(torch.FloatTensor([0.5]).to(x.device))
        if self.first:
            x = self.glu_layers[0](x)
            layers_left = range(1, self.n_glu)
        else:
            layers_left = range(self.n_glu)
        for glu_id in layers_left:
            x = torch.add(x, self.glu_layers[glu_id](x))
            x = x * scale
        return x


class FeatTransformer(nn.Module):
    def __init__(self, input_dim, output_dim, shared_layers, n_glu_independent,
                 virtual_batch_size=128, momentum=0.02):
        super().__init__()
        params = {"n_glu": n_glu_independent, "virtual_batch_size": virtual_batch_size,
                  "momentum": momentum}
        if shared_layers is None:
            self.shared = nn.Identity()
            is_first = True
        else:
            self.shared = GLU_Block(input_dim, output_dim, first=True, shared_layers=shared_layers,
                                    n_glu=len(shared_layers), virtual_batch_size=virtual_batch_size,
                                    momentum=momentum)
            is_first = False
        if n_glu_independent == 0:
            self.specifics = nn.Identity()
        else:
            spec_input_dim = input_dim if is_first else output_dim
            self.specifics = GLU_Block(spec_input_dim, output_dim, first=is_first, **params)

    def forward(self, x):
        x = self.shared(x)
        x = self.specifics(x)
        return x


class AttentiveTransformer(nn.Module):
    def __init__(self, input_dim, group_dim, virtual_batch_size=128, momentum=0.02):
        super().__init__()
        self.fc = nn.Linear(input_dim, group_dim, bias=False)
        initialize_non_glu(self.fc, input_dim, group_dim)
        self.bn = GBN(group_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, priors, processed_feat):
        x = self.fc(processed_feat)
        x = self.bn(x)
        x = torch.mul(x, priors)
        x = sparsemax(x, -1)
        return x


class TabNet(nn.Module):
    def __init__(self, input_dim, output_dim, n_d=8, n_a=8, n_steps=3, gamma=1.3,
                 n_independent=2, n_shared=2, epsilon=1e-15, virtual_batch_size=128,
                 momentum=0.02):
        super().__init__()
        self.input_dim = input_dim
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.epsilon = epsilon
        self.initial_bn = nn.BatchNorm1d(input_dim, momentum=0.01)

        shared_feat_transform = nn.ModuleList()
        for i in range(n_shared):
            if i == 0:
                shared_feat_transform.append(nn.Linear(input_dim, 2 * (n_d + n_a), bias=False))
            else:
                shared_feat_transform.append(nn.Linear(n_d + n_a, 2 * (n_d + n_a), bias=False))

        self.initial_splitter = FeatTransformer(input_dim, n_d + n_a, shared_feat_transform,
                                                n_glu_independent=n_independent,
                                                virtual_batch_size=virtual_batch_size,
                                                momentum=momentum)
        self.feat_transformers = nn.ModuleList()
        self.att_transformers = nn.ModuleList()
        for step in range(n_steps):
            self.feat_transformers.append(
                FeatTransformer(input_dim, n_d + n_a, shared_feat_transform,
                                n_glu_independent=n_independent,
                                virtual_batch_size=virtual_batch_size, momentum=momentum))
            self.att_transformers.append(
                AttentiveTransformer(n_a, input_dim, virtual_batch_size=virtual_batch_size,
                                     momentum=momentum))
        self.final_mapping = nn.Linear(n_d, output_dim, bias=False)
        initialize_non_glu(self.final_mapping, n_d, output_dim)

    def forward(self, x):
        x = self.initial_bn(x)
        prior = torch.ones(x.shape).to(x.device)
        M_loss = 0
        att = self.initial_splitter(x)[:, self.n_d:]
        res = 0
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + self.epsilon)), dim=1))
            prior = torch.mul(self.gamma - M, prior)
            masked_x = torch.mul(M, x)
            out = self.feat_transformers[step](masked_x)
            d = F.relu(out[:, : self.n_d])
            res = torch.add(res, d)
            att = out[:, self.n_d:]
        M_loss /= self.n_steps
        return self.final_mapping(res), M_loss


def make_data(n, n_features=16):
    X = torch.randn(n, n_features)
    logit = 1.5 * X[:, 0] * X[:, 1] + torch.sin(2 * X[:, 2]) - X[:, 3] + 0.5 * X[:, 4] ** 2 - 0.5
    y = (logit + 0.3 * torch.randn(n) > 0).long()
    return X, y


X_train, y_train = make_data(4096)
X_valid, y_valid = make_data(1024)
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=256, shuffle=True,
                          drop_last=True)

model = TabNet(input_dim=16, output_dim=2, n_d=8, n_a=8, n_steps=3, gamma=1.3,
               virtual_batch_size=64)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.9)
lambda_sparse = 1e-3
clip_value = 1.0
loss_fn = nn.CrossEntropyLoss()


@torch.no_grad()
def evaluate():
    model.eval()
    logits, _ = model(X_valid)
    loss = loss_fn(logits, y_valid).item()
    acc = (logits.argmax(1) == y_valid).float().mean().item()
    model.train()
    return loss, acc


vl, va = evaluate()
print(f"epoch 0 | valid_loss {vl:.4f} | valid_accuracy {va:.4f}")
for epoch in range(1, 11):
    model.train()
    total, n = 0.0, 0
    for X, y in train_loader:
        optimizer.zero_grad()
        output, M_loss = model(X)
        loss = loss_fn(output, y)
        loss = loss - lambda_sparse * M_loss
        loss.backward()
        if clip_value:
            nn.utils.clip_grad_norm_(model.parameters(), clip_value)
        optimizer.step()
        total += loss.item()
        n += 1
    scheduler.step()
    vl, va = evaluate()
    print(f"epoch {epoch} | loss {total / n:.4f} | valid_loss {vl:.4f} | valid_accuracy {va:.4f}"
          f" | lr {scheduler.get_last_lr()[0]:.5f}")
