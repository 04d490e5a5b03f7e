"""Limited-area weather emulator: predict the next 3-hourly state of 5 fields on a 16x16
grid from the current one (neural-lam style WeatherDataset with per-field standardization)."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

FIELDS = ["t2m", "msl", "u10", "v10", "tp"]
GRID = 16


def simulate(n_steps):
    yy, xx = torch.meshgrid(torch.linspace(0, 1, GRID), torch.linspace(0, 1, GRID), indexing="ij")
    states = torch.zeros(n_steps, len(FIELDS), GRID, GRID)
    phase = torch.rand(3) * 6.28
    for t in range(n_steps):
        s = t / 8.0
        states[t, 0] = 285 + 6 * torch.sin(2 * torch.pi * (xx + s / 6) + phase[0]) + 2 * yy
        states[t, 1] = 101300 + 400 * torch.cos(2 * torch.pi * (yy - s / 9) + phase[1])
        states[t, 2] = 5 * torch.sin(2 * torch.pi * (yy + s / 7) + phase[2])
        states[t, 3] = 3 * torch.cos(2 * torch.pi * (xx - s / 5))
        states[t, 4] = 0.0
    return states + 0.01 * torch.randn_like(states) * torch.tensor([1.0, 10.0, 1.0, 1.0, 0.0]).view(1, 5, 1, 1)


class WeatherDataset(Dataset):
    def __init__(self, states, mean, std, standardize=True):
        self.states = states
        self.mean = mean
        self.std = std
        self.standardize = standardize

    def __len__(self):
        return len(self.states) - 1

    def __getitem__(self, idx):
        da_state = self.states[idx]
        da_target = self.states[idx + 1]
        if self.standardize:
            da_state = (da_state - self.mean) / self.std
            da_target = (da_target - self.mean) / self.std
        return da_state, da_target


class Emulator(nn.Module):
    def __init__(self, c=len(FIELDS), hidden=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(c, hidden, 3, padding=1), nn.SiLU(),
            nn.Conv2d(hidden, hidden, 3, padding=1), nn.SiLU(),
            nn.Conv2d(hidden, c, 3, padding=1),
        )

    def forward(self, x):
        return x + self.net(x)


def main():
    states = simulate(400)
    train_states, val_states = states[:320], states[320:]
    mean = train_states.mean(dim=(0, 2, 3)).view(-1, 1, 1)
    std = train_states.std(dim=(0, 2, 3)).view(-1, 1, 1)
    print("field std:", {f: round(s, 4) for f, s in zip(FIELDS, std.flatten().tolist())})
    train_dl = DataLoader(WeatherDataset(train_states, mean, std), batch_size=8, shuffle=True)
    val_dl = DataLoader(WeatherDataset(val_states, mean, std), batch_size=16)
    model = Emulator()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    step = 0
    for epoch in range(5):
        model.train()
        for init_state, target_state in train_dl:
            pred = model(init_state)
            loss = loss_fn(pred, target_state)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 20 == 0:
                print(f"step {step}: train loss {loss.item():.5f}")
        model.eval()
        with torch.no_grad():
            val = sum(loss_fn(model(x), y).item() for x, y in val_dl) / len(val_dl)
        print(f"epoch {epoch + 1}: val loss {val:.5f}")


if __name__ == "__main__":
    main()
