"""End-to-end neural team formation (OpeNTF style): a homogeneous graph of skill, member and
team nodes, randomly initialised node embeddings as features, a GraphSAGE encoder, and a
dot-product decoder trained with binary_cross_entropy_with_logits to predict which experts
(members) belong to a team. Negative member-team pairs are sampled at every step; held-out
member-team edges are used for validation (loss and AUC)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

cfg = dict(d=64, h=[64, 64], e=25, b=256, lr=0.005, ns=5, n_fields=8,
           n_skills=48, n_members=240, n_teams=600)


def make_teams(cfg, seed=0):
    """Synthetic teams: every team works in one field, needs 3 skills of that field and
    has 3-4 members who mostly come from the same field."""
    rng = np.random.default_rng(seed)
    skill_field = np.arange(cfg['n_skills']) % cfg['n_fields']
    member_field = rng.integers(0, cfg['n_fields'], cfg['n_members'])
    team_skills, team_members = [], []
    for _ in range(cfg['n_teams']):
        f = rng.integers(0, cfg['n_fields'])
        team_skills.append(rng.choice(np.where(skill_field == f)[0], 3, replace=False))
        pool = np.where(member_field == f)[0]
        size = rng.integers(3, 5)
        members = set(rng.choice(pool, size, replace=False).tolist())
        if rng.random() < 0.2:
            members.add(int(rng.integers(0, cfg['n_members'])))
        team_members.append(sorted(members))
    return team_skills, team_members


class SAGEConv(nn.Module):
    """Mean-aggregation GraphSAGE layer: lin_l(mean_j x_j) + lin_r(x_i)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros(x.size(0), x.size(1)).index_add_(0, dst, x[src])
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.numel())).clamp(min=1)
        return self.lin_l(agg / deg.unsqueeze(1)) + self.lin_r(x)


class Model(nn.Module):
    def __init__(self, cfg, num_nodes):
        super().__init__()
        self.node_emb = nn.Embedding(num_nodes, cfg['d'])
        nn.init.xavier_uniform_(self.node_emb.weight)
        self.encoder = nn.ModuleList()
        for i, l in enumerate(cfg['h']):
            self.encoder.append(SAGEConv(cfg['d'] if i == 0 else cfg['h'][i - 1], cfg['h'][i]))

    def forward(self, edge_index):
        x = self.node_emb.weight
        for conv in self.encoder: x = F.relu(conv(x, edge_index))
        return x

    def decode(self, x_i, x_j): return (x_i * x_j).sum(dim=-1)


def auc_score(pos, neg):
    diff = pos.unsqueeze(1) - neg.unsqueeze(0)
    return ((diff > 0).float().mean() + 0.5 * (diff == 0).float().mean()).item()


def main():
    team_skills, team_members = make_teams(cfg)
    n_s, n_m, n_t = cfg['n_skills'], cfg['n_members'], cfg['n_teams']
    off_s, off_m, off_t = 0, n_s, n_s + n_m
    num_nodes = n_s + n_m + n_t

    skill_team = [(off_s + s, off_t + t) for t, ss in enumerate(team_skills) for s in ss]
    member_team = np.array([(off_m + m, off_t + t) for t, ms in enumerate(team_members) for m in ms])
    perm = np.random.default_rng(1).permutation(len(member_team))
    n_val = len(member_team) // 10
    val_pos = torch.tensor(member_team[perm[:n_val]]).t()
    train_pos = torch.tensor(member_team[perm[n_val:]]).t()

    # message passing graph: all skill-team edges + training member-team edges, undirected
    mp = torch.cat([torch.tensor(skill_team).t(), train_pos], dim=1)
    edge_index = torch.cat([mp, mp.flip(0)], dim=1)
    print(f'nodes {num_nodes} (skill {n_s}, member {n_m}, team {n_t}) | message-passing edges {edge_index.size(1)} '
          f'| supervision edges train {train_pos.size(1)} valid {val_pos.size(1)}')

    g = torch.Generator().manual_seed(2)
    n_val_neg = n_val * cfg['ns']
    val_neg = torch.stack([torch.randint(off_m, off_m + n_m, (n_val_neg,), generator=g),
                           torch.randint(off_t, off_t + n_t, (n_val_neg,), generator=g)])

    model = Model(cfg, num_nodes)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg['lr'])
    criterion = nn.BCEWithLogitsLoss()

    step = 0
    for epoch in range(1, cfg['e'] + 1):
        model.train()
        order = torch.randperm(train_pos.size(1))
        e_loss, n_b = 0.0, 0
        for i in range(0, len(order), cfg['b']):
            pos = train_pos[:, order[i:i + cfg['b']]]
            n_neg = pos.size(1) * cfg['ns']
            neg = torch.stack([torch.randint(off_m, off_m + n_m, (n_neg,)),
                               torch.randint(off_t, off_t + n_t, (n_neg,))])
            pairs = torch.cat([pos, neg], dim=1)
            labels = torch.cat([torch.ones(pos.size(1)), torch.zeros(n_neg)])
            optimizer.zero_grad()
            x = model(edge_index)
            logits = model.decode(x[pairs[0]], x[pairs[1]])
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            e_loss += loss.item(); n_b += 1; step += 1

        model.eval()
        with torch.no_grad():
            x = model(edge_index)
            pos_logit = model.decode(x[val_pos[0]], x[val_pos[1]])
            neg_logit = model.decode(x[val_neg[0]], x[val_neg[1]])
            v_loss = criterion(torch.cat([pos_logit, neg_logit]),
                               torch.cat([torch.ones(n_val), torch.zeros(n_val_neg)])).item()
            zero_frac = (x[off_m:] == 0).float().mean().item()
        if epoch == 1 or epoch % 4 == 0 or epoch == cfg['e']:
            print(f'epoch {epoch:2d} step {step:3d} | train loss {e_loss / n_b:.4f} | valid loss {v_loss:.4f} '
                  f'| valid auc {auc_score(pos_logit, neg_logit):.3f} | zero emb entries {zero_frac:.2f}')


if __name__ == '__main__':
    main()
