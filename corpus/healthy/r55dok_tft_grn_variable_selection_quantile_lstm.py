"""Temporal-Fusion-Transformer-style forecaster (tft-torch building blocks): per-variable numeric
embeddings, variable selection networks built from gated residual networks, a static covariate
encoder that conditions the LSTM encoder/decoder, gate-add-norm and a multi-horizon quantile head.
Trained on synthetic store sales with weekly seasonality."""
import math

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

NUM_HIST, NUM_FUT, NUM_STATIC = 3, 2, 2
ENC_LEN, DEC_LEN = 14, 4
QUANTILES = [0.1, 0.5, 0.9]
STATE = 16


class TimeDistributed(nn.Module):
    def __init__(self, module, batch_first=True, return_reshaped=True):
        super(TimeDistributed, self).__init__()
        self.module = module
        self.batch_first = batch_first
        self.return_reshaped = return_reshaped

    def forward(self, x):
        if len(x.size()) <= 2:
            return self.module(x)
        x_reshape = x.contiguous().view(-1, x.size(-1))
        y = self.module(x_reshape)
        if self.return_reshaped:
            if self.batch_first:
                y = y.contiguous().view(x.size(0), -1, y.size(-1))
            else:
                y = y.view(-1, x.size(1), y.size(-1))
        return y


class GatedLinearUnit(nn.Module):
    def __init__(self, input_dim):
        super(GatedLinearUnit, self).__init__()
        self.fc1 = nn.Linear(input_dim, input_dim)
        self.fc2 = nn.Linear(input_dim, input_dim)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        sig = self.sigmoid(self.fc1(x))
        x = self.fc2(x)
        return torch.mul(sig, x)


class GatedResidualNetwork(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, dropout=0.05, context_dim=None, batch_first=True):
        super(GatedResidualNetwork, self).__init__()
        self.project_residual = input_dim != output_dim
        if self.project_residual:
            self.skip_layer = TimeDistributed(nn.Linear(input_dim, output_dim))
        self.fc1 = TimeDistributed(nn.Linear(input_dim, hidden_dim), batch_first=batch_first)
        if context_dim is not None:
            self.context_projection = TimeDistributed(nn.Linear(context_dim, hidden_dim, bias=False),
                                                      batch_first=batch_first)
        self.elu1 = nn.ELU()
        self.fc2 = TimeDistributed(nn.Linear(hidden_dim, output_dim), batch_first=batch_first)
        self.dropout = nn.Dropout(dropout)
        self.gate = TimeDistributed(GatedLinearUnit(output_dim), batch_first=batch_first)
        self.layernorm = TimeDistributed(nn.LayerNorm(output_dim), batch_first=batch_first)

    def forward(self, x, context=None):
        residual = self.skip_layer(x) if self.project_residual else x
        x = self.fc1(x)
        if context is not None:
            x = x + self.context_projection(context)
        x = self.elu1(x)
        x = self.fc2(x)
        x = self.dropout(x)
        x = self.gate(x)
        x = x + residual
        return self.layernorm(x)


class VariableSelectionNetwork(nn.Module):
    def __init__(self, input_dim, num_inputs, hidden_dim, dropout, context_dim=None):
        super(VariableSelectionNetwork, self).__init__()
        self.input_dim = input_dim
        self.num_inputs = num_inputs
        self.flattened_grn = GatedResidualNetwork(num_inputs * input_dim, hidden_dim, num_inputs,
                                                  dropout=dropout, context_dim=context_dim)
        self.softmax = nn.Softmax(dim=1)
        self.single_variable_grns = nn.ModuleList(
            [GatedResidualNetwork(input_dim, hidden_dim, hidden_dim, dropout=dropout) for _ in range(num_inputs)])

    def forward(self, flattened_embedding, context=None):
        sparse_weights = self.flattened_grn(flattened_embedding, context)
        sparse_weights = self.softmax(sparse_weights).unsqueeze(2)
        processed_inputs = []
        for i in range(self.num_inputs):
            processed_inputs.append(
                self.single_variable_grns[i](flattened_embedding[..., (i * self.input_dim):(i + 1) * self.input_dim]))
        processed_inputs = torch.stack(processed_inputs, dim=-1)
        outputs = processed_inputs * sparse_weights.transpose(1, 2)
        outputs = outputs.sum(axis=-1)
        return outputs, sparse_weights


class NumericInputTransformation(nn.Module):
    def __init__(self, num_inputs, state_size):
        super(NumericInputTransformation, self).__init__()
        self.num_inputs = num_inputs
        self.numeric_projection_layers = nn.ModuleList([nn.Linear(1, state_size) for _ in range(num_inputs)])

    def forward(self, x):
        return [self.numeric_projection_layers[i](x[:, [i]]) for i in range(self.num_inputs)]


class GateAddNorm(nn.Module):
    def __init__(self, input_dim, dropout):
        super(GateAddNorm, self).__init__()
        self.dropout = nn.Dropout(dropout)
        self.gate = TimeDistributed(GatedLinearUnit(input_dim))
        self.layernorm = TimeDistributed(nn.LayerNorm(input_dim))

    def forward(self, x, residual):
        return self.layernorm(self.gate(self.dropout(x)) + residual)


class TemporalFusionForecaster(nn.Module):
    def __init__(self, state_size=STATE, dropout=0.05):
        super(TemporalFusionForecaster, self).__init__()
        self.state_size = state_size
        self.static_transform = NumericInputTransformation(NUM_STATIC, state_size)
        self.hist_transform = TimeDistributed(NumericInputTransformation(NUM_HIST, state_size), return_reshaped=False)
        self.fut_transform = TimeDistributed(NumericInputTransformation(NUM_FUT, state_size), return_reshaped=False)
        self.static_selection = VariableSelectionNetwork(state_size, NUM_STATIC, state_size, dropout)
        self.static_encoder_selection = GatedResidualNetwork(state_size, state_size, state_size, dropout)
        self.static_encoder_enrichment = GatedResidualNetwork(state_size, state_size, state_size, dropout)
        self.static_encoder_sequential_cell_init = GatedResidualNetwork(state_size, state_size, state_size, dropout)
        self.static_encoder_sequential_state_init = GatedResidualNetwork(state_size, state_size, state_size, dropout)
        self.historical_ts_selection = VariableSelectionNetwork(state_size, NUM_HIST, state_size, dropout,
                                                                context_dim=state_size)
        self.future_ts_selection = VariableSelectionNetwork(state_size, NUM_FUT, state_size, dropout,
                                                            context_dim=state_size)
        self.past_lstm = nn.LSTM(state_size, state_size, batch_first=True)
        self.future_lstm = nn.LSTM(state_size, state_size, batch_first=True)
        self.post_lstm_gating = GateAddNorm(state_size, dropout)
        self.static_enrichment_grn = GatedResidualNetwork(state_size, state_size, state_size, dropout,
                                                          context_dim=state_size)
        self.pos_wise_ff_grn = GatedResidualNetwork(state_size, state_size, state_size, dropout)
        self.output_layer = nn.Linear(state_size, len(QUANTILES))

    def embed_temporal(self, transform, x):
        b, t, n = x.shape
        emb = torch.cat(transform(x), dim=1)
        return emb.view(b, t, -1)

    def forward(self, static, hist, fut):
        b = static.shape[0]
        static_emb = torch.cat(self.static_transform(static), dim=1)
        selected_static, static_weights = self.static_selection(static_emb)
        c_selection = self.static_encoder_selection(selected_static)
        c_enrichment = self.static_encoder_enrichment(selected_static)
        c_seq_hidden = self.static_encoder_sequential_state_init(selected_static)
        c_seq_cell = self.static_encoder_sequential_cell_init(selected_static)

        hist_emb = self.embed_temporal(self.hist_transform, hist)
        fut_emb = self.embed_temporal(self.fut_transform, fut)
        ctx_hist = c_selection.unsqueeze(1).repeat(1, ENC_LEN, 1).view(b * ENC_LEN, -1)
        ctx_fut = c_selection.unsqueeze(1).repeat(1, DEC_LEN, 1).view(b * DEC_LEN, -1)
        sel_hist, hist_weights = self.historical_ts_selection(hist_emb.view(b * ENC_LEN, -1), ctx_hist)
        sel_fut, fut_weights = self.future_ts_selection(fut_emb.view(b * DEC_LEN, -1), ctx_fut)
        sel_hist = sel_hist.view(b, ENC_LEN, -1)
        sel_fut = sel_fut.view(b, DEC_LEN, -1)

        past_out, hidden = self.past_lstm(sel_hist, (c_seq_hidden.unsqueeze(0), c_seq_cell.unsqueeze(0)))
        future_out, _ = self.future_lstm(sel_fut, hidden)
        lstm_out = torch.cat([past_out, future_out], dim=1)
        lstm_in = torch.cat([sel_hist, sel_fut], dim=1)
        gated = self.post_lstm_gating(lstm_out, residual=lstm_in)
        enriched = self.static_enrichment_grn(
            gated, context=c_enrichment.unsqueeze(1).repeat(1, ENC_LEN + DEC_LEN, 1))
        out = self.pos_wise_ff_grn(enriched[:, ENC_LEN:, :])
        return self.output_layer(out), hist_weights.view(b, ENC_LEN, -1).mean(dim=(0, 1))


def get_quantiles_loss_and_q_risk(outputs, targets, desired_quantiles):
    errors = targets.unsqueeze(-1) - outputs
    losses_array = torch.max((desired_quantiles - 1) * errors, desired_quantiles * errors)
    q_loss = (losses_array.sum(dim=-1)).mean(dim=-1).mean()
    q_risk = 2 * (losses_array.sum(dim=1).sum(dim=0)) / (targets.abs().sum().unsqueeze(-1))
    return q_loss, q_risk, losses_array


class StoreSalesWindows(Dataset):
    def __init__(self, n_series, seed):
        rng = np.random.RandomState(seed)
        total = ENC_LEN + DEC_LEN
        self.static, self.hist, self.fut, self.target = [], [], [], []
        for _ in range(n_series):
            level = rng.uniform(0.5, 2.0)
            amp = rng.uniform(0.2, 1.0)
            start = rng.randint(0, 7)
            t = np.arange(start, start + total)
            dow = np.sin(2 * math.pi * t / 7.0)
            promo = (rng.uniform(size=total) < 0.2).astype(np.float32)
            sales = level + amp * dow + 0.8 * promo + 0.1 * rng.randn(total)
            noise_feat = rng.randn(total)
            self.static.append([level, amp])
            self.hist.append(np.stack([sales[:ENC_LEN], dow[:ENC_LEN], noise_feat[:ENC_LEN]], axis=1))
            self.fut.append(np.stack([dow[ENC_LEN:], promo[ENC_LEN:]], axis=1))
            self.target.append(sales[ENC_LEN:])
        self.static = torch.tensor(np.array(self.static), dtype=torch.float32)
        self.hist = torch.tensor(np.array(self.hist), dtype=torch.float32)
        self.fut = torch.tensor(np.array(self.fut), dtype=torch.float32)
        self.target = torch.tensor(np.array(self.target), dtype=torch.float32)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return self.static[i], self.hist[i], self.fut[i], self.target[i]


def main():
    train_loader = DataLoader(StoreSalesWindows(768, seed=1), batch_size=64, shuffle=True)
    val_loader = DataLoader(StoreSalesWindows(256, seed=2), batch_size=256)
    model = TemporalFusionForecaster()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    quantiles = torch.tensor(QUANTILES)
    step = 0
    for epoch in range(1, 9):
        model.train()
        running = 0.0
        for static, hist, fut, target in train_loader:
            preds, _ = model(static, hist, fut)
            q_loss, _, _ = get_quantiles_loss_and_q_risk(preds, target, quantiles)
            opt.zero_grad()
            q_loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            running += q_loss.item()
            step += 1
        model.eval()
        with torch.no_grad():
            static, hist, fut, target = next(iter(val_loader))
            preds, weights = model(static, hist, fut)
            val_loss, q_risk, _ = get_quantiles_loss_and_q_risk(preds, target, quantiles)
            coverage = ((target >= preds[..., 0]) & (target <= preds[..., 2])).float().mean()
        print('epoch {:2d} step {:3d} train q-loss {:.4f} val q-loss {:.4f} q-risk {} '
              '10-90 coverage {:.2f} hist var weights {}'.format(
                  epoch, step, running / len(train_loader), val_loss.item(),
                  [round(v, 3) for v in q_risk.tolist()], coverage.item(),
                  [round(v, 2) for v in weights.tolist()]))


if __name__ == '__main__':
    main()
