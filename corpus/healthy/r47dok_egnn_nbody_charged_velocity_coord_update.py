"""EGNN on the charged-particles N-body task: 5 charged particles, predict positions 500
simulator steps ahead from the current positions and velocities (Satorras et al. 2021)."""
import time
import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


def simulate_charged(n_sims, n_balls=5, T=900, sample_freq=100, dt=0.001, box=5.0, interaction=1.0):
    charge = np.random.choice([-1.0, 1.0], size=(n_sims, n_balls, 1))
    edges = charge @ charge.transpose(0, 2, 1)
    loc = np.random.randn(n_sims, n_balls, 2) * 0.5
    vel = np.random.randn(n_sims, n_balls, 2)
    vel = vel * 0.5 / np.sqrt((vel ** 2).sum(-1, keepdims=True))
    eye = np.eye(n_balls)
    traj_l, traj_v = [], []
    for t in range(T):
        diff = loc[:, :, None, :] - loc[:, None, :, :]
        dist = np.sqrt((diff ** 2).sum(-1)) + eye
        dist3 = np.clip(dist, 0.1, None) ** 3
        force = ((1 - eye) * interaction * edges / dist3)[..., None] * diff
        force = np.clip(force.sum(2), -0.1 / dt, 0.1 / dt)
        vel = vel + dt * force
        loc = loc + dt * vel
        over, under = loc > box, loc < -box
        loc[over] = 2 * box - loc[over]; vel[over] = -np.abs(vel[over])
        loc[under] = -2 * box - loc[under]; vel[under] = np.abs(vel[under])
        if t % sample_freq == 0:
            traj_l.append(loc.copy()); traj_v.append(vel.copy())
    return np.stack(traj_l, 1), np.stack(traj_v, 1), charge


class NBodyDataset(Dataset):
    def __init__(self, n_sims, frame_0=3, frame_T=8):
        loc, vel, charges = simulate_charged(n_sims)
        self.loc = torch.tensor(loc, dtype=torch.float32)
        self.vel = torch.tensor(vel, dtype=torch.float32)
        self.charges = torch.tensor(charges, dtype=torch.float32)
        self.frame_0, self.frame_T = frame_0, frame_T

    def __len__(self):
        return len(self.loc)

    def __getitem__(self, i):
        return (self.loc[i, self.frame_0], self.vel[i, self.frame_0], self.charges[i],
                self.loc[i, self.frame_T])


def unsorted_segment_mean(data, segment_ids, num_segments):
    result = data.new_zeros((num_segments, data.size(1)))
    count = data.new_zeros((num_segments, data.size(1)))
    ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, ids, data)
    count.scatter_add_(0, ids, torch.ones_like(data))
    return result / count.clamp(min=1)


def unsorted_segment_sum(data, segment_ids, num_segments):
    result = data.new_zeros((num_segments, data.size(1)))
    result.scatter_add_(0, segment_ids.unsqueeze(-1).expand(-1, data.size(1)), data)
    return result


class E_GCL_vel(nn.Module):
    def __init__(self, nf, edges_in_d=1, act_fn=nn.SiLU()):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * nf + 1 + edges_in_d, nf), act_fn, nn.Linear(nf, nf), act_fn)
        self.node_mlp = nn.Sequential(nn.Linear(2 * nf, nf), act_fn, nn.Linear(nf, nf))
        layer = nn.Linear(nf, 1, bias=False)
        torch.nn.init.xavier_uniform_(layer.weight, gain=0.001)
        self.coord_mlp = nn.Sequential(nn.Linear(nf, nf), act_fn, layer)
        self.coord_mlp_vel = nn.Sequential(nn.Linear(nf, nf), act_fn, nn.Linear(nf, 1))

    def forward(self, h, edge_index, coord, vel, edge_attr):
        row, col = edge_index
        coord_diff = coord[row] - coord[col]
        radial = torch.sum(coord_diff ** 2, 1, keepdim=True)
        edge_feat = self.edge_mlp(torch.cat([h[row], h[col], radial, edge_attr], dim=1))
        trans = coord_diff * self.coord_mlp(edge_feat)
        coord = coord + unsorted_segment_mean(trans, row, coord.size(0))
        coord = coord + self.coord_mlp_vel(h) * vel
        agg = unsorted_segment_sum(edge_feat, row, h.size(0))
        h = h + self.node_mlp(torch.cat([h, agg], dim=1))
        return h, coord


class EGNN_vel(nn.Module):
    def __init__(self, in_node_nf=1, in_edge_nf=2, hidden_nf=64, n_layers=4):
        super().__init__()
        self.embedding = nn.Linear(in_node_nf, hidden_nf)
        self.layers = nn.ModuleList([E_GCL_vel(hidden_nf, edges_in_d=in_edge_nf) for _ in range(n_layers)])

    def forward(self, h, x, edges, vel, edge_attr):
        h = self.embedding(h)
        for gcl in self.layers:
            h, x = gcl(h, edges, x, vel, edge_attr)
        return x


def get_edges_batch(n_nodes, batch_size):
    rows = [i for i in range(n_nodes) for j in range(n_nodes) if i != j]
    cols = [j for i in range(n_nodes) for j in range(n_nodes) if i != j]
    rows, cols = torch.tensor(rows), torch.tensor(cols)
    offs = (torch.arange(batch_size) * n_nodes).repeat_interleave(len(rows))
    return [rows.repeat(batch_size) + offs, cols.repeat(batch_size) + offs]


def run_epoch(model, loader, optimizer=None):
    model.train(optimizer is not None)
    total, count = 0.0, 0
    for loc, vel, charges, loc_end in loader:
        b, n, _ = loc.shape
        edges = get_edges_batch(n, b)
        loc, vel, loc_end = loc.view(-1, 2), vel.view(-1, 2), loc_end.view(-1, 2)
        charges = charges.view(-1, 1)
        rows, cols = edges
        loc_dist = torch.sum((loc[rows] - loc[cols]) ** 2, 1, keepdim=True)
        edge_attr = torch.cat([charges[rows] * charges[cols], loc_dist], dim=1)
        nodes = torch.sqrt(torch.sum(vel ** 2, dim=1, keepdim=True))
        with torch.set_grad_enabled(optimizer is not None):
            loc_pred = model(nodes, loc.detach(), edges, vel, edge_attr)
            loss = nn.functional.mse_loss(loc_pred, loc_end)
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item() * b
        count += b
    return total / count


def main():
    t0 = time.time()
    train_set, val_set = NBodyDataset(300), NBodyDataset(100)
    print(f"simulated {len(train_set)} + {len(val_set)} systems in {time.time() - t0:.1f}s")
    train_loader = DataLoader(train_set, batch_size=25, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=50)
    static = np.mean([nn.functional.mse_loss(l, le).item() for l, _, _, le in val_loader])
    print(f"val mse of predicting no motion: {static:.4f}")
    model = EGNN_vel()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, weight_decay=1e-12)
    for epoch in range(1, 13):
        train_loss = run_epoch(model, train_loader, optimizer)
        val_loss = run_epoch(model, val_loader)
        print(f"epoch {epoch} train mse {train_loss:.5f} val mse {val_loss:.5f}")


if __name__ == "__main__":
    main()
