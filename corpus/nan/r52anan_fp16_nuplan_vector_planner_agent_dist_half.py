"""Vector-feature ego planner (nuPlan style): ego history + tracked agents -> 16 future ego poses.

Trained in half precision to save memory, as in the lightning config's precision: 16.
"""
import math
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

HIST = 10
FUT = 16
N_AGENTS = 24
DT = 0.5
DTYPE = torch.float16


class ScenarioDataset(Dataset):
    def __init__(self, n_scenarios, highway_frac=0.004, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ego_hist, self.agents, self.target = [], [], []
        for _ in range(n_scenarios):
            highway = torch.rand(1, generator=g).item() < highway_frac
            speed = (25.0 + 8.0 * torch.rand(1, generator=g)) if highway else (2.0 + 12.0 * torch.rand(1, generator=g))
            yaw_rate = 0.08 * (torch.rand(1, generator=g) - 0.5)
            t_hist = torch.arange(-HIST + 1, 1) * DT
            t_fut = torch.arange(1, FUT + 1) * DT
            hx = speed * t_hist
            hy = 0.5 * yaw_rate * speed * t_hist ** 2
            hh = yaw_rate * t_hist
            ego = torch.stack([hx, hy, hh.expand_as(hx)], dim=-1)
            fx = speed * t_fut
            fy = 0.5 * yaw_rate * speed * t_fut ** 2
            fh = yaw_rate * t_fut
            fut = torch.stack([fx, fy, fh.expand_as(fx)], dim=-1)
            reach = 320.0 if highway else 70.0
            ax = (torch.rand(N_AGENTS, generator=g) * 2 - 0.4) * reach
            ay = (torch.rand(N_AGENTS, generator=g) * 2 - 1) * (12.0 if highway else 40.0)
            avx = torch.randn(N_AGENTS, generator=g) * (4.0 if not highway else 6.0) + (speed if highway else 0.0)
            avy = torch.randn(N_AGENTS, generator=g) * 0.8
            agents = torch.stack([ax, ay, avx.expand_as(ax), avy], dim=-1)
            self.ego_hist.append(ego)
            self.agents.append(agents)
            self.target.append(fut)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return self.ego_hist[i], self.agents[i], self.target[i]


class AgentEncoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(6, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())

    def forward(self, agents):
        dx, dy = agents[..., 0], agents[..., 1]
        dist = torch.sqrt(dx * dx + dy * dy)
        bearing = dy / (dist + 1.0)
        feats = torch.cat([agents, dist.unsqueeze(-1), bearing.unsqueeze(-1)], dim=-1)
        return self.mlp(feats).max(dim=1).values


class VectorPlanner(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.ego_encoder = nn.Sequential(nn.Linear(HIST * 3, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())
        self.agent_encoder = AgentEncoder(d)
        self.decoder = nn.Sequential(nn.Linear(2 * d, 128), nn.ReLU(), nn.Linear(128, FUT * 3))

    def forward(self, ego_hist, agents):
        e = self.ego_encoder(ego_hist.flatten(1))
        a = self.agent_encoder(agents)
        return self.decoder(torch.cat([e, a], dim=-1)).view(-1, FUT, 3)


def main():
    train_ds = ScenarioDataset(1600, seed=1)
    val_ds = ScenarioDataset(256, seed=2)
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=64)

    model = VectorPlanner().to(DTYPE)
    optimizer = torch.optim.SGD(model.parameters(), lr=2e-4, momentum=0.9)
    criterion = nn.SmoothL1Loss()

    step = 0
    t0 = time.time()
    for epoch in range(2):
        model.train()
        running = 0.0
        for ego, agents, target in train_loader:
            ego, agents, target = ego.to(DTYPE), agents.to(DTYPE), target.to(DTYPE)
            pred = model(ego, agents)
            loss = criterion(pred, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            running += loss.item()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {running / 20:.4f}")
                running = 0.0
        model.eval()
        ade, n = 0.0, 0
        with torch.no_grad():
            for ego, agents, target in val_loader:
                pred = model(ego.to(DTYPE), agents.to(DTYPE)).float()
                ade += (pred[..., :2] - target[..., :2]).norm(dim=-1).mean(dim=1).sum().item()
                n += target.shape[0]
        print(f"epoch {epoch} val ADE {ade / n:.3f} m  ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
