"""Event-guided motion deblurring (blurry frame + events -> sharp latent frame), in the style of
"Motion Deblurring with Real Events": each sample is one blurry exposure, the six event windows
between its seven sharp sub-frames (per-pixel event counts and latest timestamps for both
polarities), and the sharp middle frame as target. The event tensors are simulated from a moving
camera over a textured scene; the timestamps are seconds since the start of the recording."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

H, W = 36, 36
CROP = 32
N_SHARP = 7
MICRO = 4
CONTRAST = 0.15
BATCH = 8
EPOCHS = 5
LR = 1e-3


def make_scene(rng, size=64):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    img = np.full((size, size), 0.2, np.float32)
    for _ in range(12):
        cy, cx = rng.uniform(0, size, 2)
        s = rng.uniform(2.0, 7.0)
        img += rng.uniform(-0.3, 0.6) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    for _ in range(4):
        y0, x0 = rng.integers(0, size - 12, 2)
        h, w = rng.integers(4, 12, 2)
        img[y0:y0 + h, x0:x0 + w] += rng.uniform(-0.3, 0.4)
    return np.clip(img, 0.02, 1.0)


def render(scene, shifts):
    s = torch.from_numpy(scene)[None, None]
    size = scene.shape[0]
    out = []
    for dy, dx in shifts:
        theta = torch.tensor([[[H / size, 0.0, 2 * dx / size], [0.0, W / size, 2 * dy / size]]],
                             dtype=torch.float32)
        grid = F.affine_grid(theta, (1, 1, H, W), align_corners=False)
        out.append(F.grid_sample(s, grid, align_corners=False)[0, 0].numpy())
    return np.stack(out)


def simulate_clip(rng, t_start, static_windows):
    scene = make_scene(rng)
    angle = rng.uniform(0, 2 * np.pi)
    v = rng.uniform(1.0, 2.5) * np.array([np.sin(angle), np.cos(angle)], np.float32)
    n_t = (N_SHARP - 1) * MICRO + 1
    pos = np.zeros((n_t, 2), np.float32)
    for k in range(1, n_t):
        win = (k - 1) // MICRO
        step = 0.0 if win in static_windows else 1.0 / MICRO
        pos[k] = pos[k - 1] + v * step
    frames = render(scene, pos)
    dt = 0.005 / MICRO
    log_i = np.log(frames + 1e-3)
    counts, times = [], []
    for win in range(N_SHARP - 1):
        cnt = np.zeros((1, H, W, 2), np.int16)
        tim = np.zeros((1, H, W, 2), np.float32)
        ref = log_i[win * MICRO].copy()
        for m in range(1, MICRO + 1):
            k = win * MICRO + m
            diff = log_i[k] - ref
            on, off = diff > CONTRAST, diff < -CONTRAST
            t_k = t_start + k * dt
            cnt[0, on, 0] += 1
            cnt[0, off, 1] += 1
            tim[0, on, 0] = t_k
            tim[0, off, 1] = t_k
            ref[on | off] = log_i[k][on | off]
        counts.append(cnt)
        times.append(tim)
    sharp = frames[::MICRO]
    blurry = frames.mean(0)
    return counts, times, sharp, blurry


class EventDeblurData(Dataset):
    def __init__(self, n_clips, seed, is_test=False):
        rng = np.random.default_rng(seed)
        self.is_test = is_test
        self.clips = []
        t = 3.0
        for i in range(n_clips):
            static = (3, 4) if rng.random() < 0.01 else ()
            self.clips.append(simulate_clip(rng, t, static))
            t += 0.04

    def __len__(self):
        return len(self.clips)

    def _read_events(self, event_count_images, event_time_images, n_frames):
        event_count_image = event_count_images[:n_frames, :, :, :]
        event_count_image = torch.sum(event_count_image, dim=0).type(torch.float32)
        event_count_image = event_count_image.permute(2, 0, 1)

        event_time_image = event_time_images[:n_frames, :, :, :]
        event_time_image = torch.max(event_time_image, dim=0)[0]

        event_time_image /= torch.max(event_time_image)
        event_time_image = event_time_image.permute(2, 0, 1)
        return event_count_image, event_time_image

    def __getitem__(self, index):
        counts, times, sharp, blurry = self.clips[index]
        event_images = []
        for cnt, tim in zip(counts, times):
            c, t = self._read_events(torch.from_numpy(cnt), torch.from_numpy(tim), 1)
            event_images.append(torch.cat((c, t), 0))
        events = torch.cat(event_images, 0)
        blurry = torch.from_numpy(blurry)[None]
        target = torch.from_numpy(sharp[N_SHARP // 2])[None]
        if self.is_test:
            y = x = (H - CROP) // 2
        else:
            y, x = np.random.randint(0, H - CROP + 1, 2)
        crop = (Ellipsis, slice(y, y + CROP), slice(x, x + CROP))
        return events[crop], blurry[crop], target[crop]


class DeblurNet(nn.Module):
    def __init__(self, n_event_ch=24, ch=32):
        super().__init__()
        self.event_enc = nn.Sequential(nn.Conv2d(n_event_ch, ch, 3, padding=1), nn.ReLU())
        self.image_enc = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.ReLU())
        self.fuse = nn.Sequential(
            nn.Conv2d(2 * ch, ch, 3, padding=1), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
            nn.Conv2d(ch, 1, 3, padding=1),
        )

    def forward(self, events, blurry):
        f = torch.cat((self.event_enc(events), self.image_enc(blurry)), 1)
        return blurry + self.fuse(f)


def psnr(pred, target):
    mse = F.mse_loss(pred.clamp(0, 1), target)
    return 10 * torch.log10(1.0 / mse)


train_set = EventDeblurData(240, seed=4)
val_set = EventDeblurData(40, seed=2, is_test=True)
train_loader = DataLoader(train_set, batch_size=BATCH, shuffle=True)
val_loader = DataLoader(val_set, batch_size=20)

model = DeblurNet()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for events, blurry, target in train_loader:
        pred = model(events, blurry)
        loss = F.l1_loss(pred, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 5 == 0:
            print(f"epoch {epoch + 1} step {step} l1 {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        scores = [psnr(model(e, b), t).item() for e, b, t in val_loader]
        base = [psnr(b, t).item() for e, b, t in val_loader]
    print(f"epoch {epoch + 1} train l1 {running / len(train_loader):.4f} "
          f"val psnr {np.mean(scores):.2f} dB (blurry input {np.mean(base):.2f} dB)")
