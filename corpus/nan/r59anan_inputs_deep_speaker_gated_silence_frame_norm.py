"""Speaker-identification pre-training (softmax over speakers) for a deep-speaker style embedding
network. Features follow deep-speaker's pre_process_inputs: 64 filterbank energies + deltas per
25 ms frame, each frame normalised, then a 1-D conv net pools the frames into an embedding."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

SAMPLE_RATE = 8000
NUM_SPEAKERS = 16
UTTS_PER_SPEAKER = 16
NUM_FRAMES = 78


# ---- python_speech_features (fbank / delta), inlined ----------------------------------------
def hz2mel(hz):
    return 2595 * np.log10(1 + hz / 700.)


def mel2hz(mel):
    return 700 * (10 ** (mel / 2595.0) - 1)


def get_filterbanks(nfilt=64, nfft=512, samplerate=8000, lowfreq=0, highfreq=None):
    highfreq = highfreq or samplerate / 2
    melpoints = np.linspace(hz2mel(lowfreq), hz2mel(highfreq), nfilt + 2)
    bin = np.floor((nfft + 1) * mel2hz(melpoints) / samplerate)
    fbank = np.zeros([nfilt, nfft // 2 + 1])
    for j in range(0, nfilt):
        for i in range(int(bin[j]), int(bin[j + 1])):
            fbank[j, i] = (i - bin[j]) / (bin[j + 1] - bin[j])
        for i in range(int(bin[j + 1]), int(bin[j + 2])):
            fbank[j, i] = (bin[j + 2] - i) / (bin[j + 2] - bin[j + 1])
    return fbank


FILTERS = get_filterbanks()


def fbank(signal, samplerate=8000, winlen=0.025, winstep=0.01, nfilt=64, nfft=512, preemph=0.97):
    signal = np.append(signal[0], signal[1:] - preemph * signal[:-1])
    frame_len, frame_step = int(round(winlen * samplerate)), int(round(winstep * samplerate))
    numframes = 1 + int(np.ceil((len(signal) - frame_len) / frame_step))
    padsignal = np.concatenate((signal, np.zeros(((numframes - 1) * frame_step + frame_len - len(signal),))))
    idx = np.arange(frame_len)[None, :] + frame_step * np.arange(numframes)[:, None]
    frames = padsignal[idx]
    pspec = 1.0 / nfft * np.square(np.absolute(np.fft.rfft(frames, nfft)))
    energy = np.sum(pspec, 1)
    energy = np.where(energy == 0, np.finfo(float).eps, energy)
    feat = np.dot(pspec, FILTERS.T)
    feat = np.where(feat == 0, np.finfo(float).eps, feat)
    return feat, energy


def delta(feat, N):
    denominator = 2 * sum([i ** 2 for i in range(1, N + 1)])
    padded = np.pad(feat, ((N, N), (0, 0)), mode='edge')
    out = np.empty_like(feat)
    for t in range(len(feat)):
        out[t] = np.dot(np.arange(-N, N + 1), padded[t: t + 2 * N + 1]) / denominator
    return out


# ---- deep-speaker pre-processing ------------------------------------------------------------
def normalize_frames(m):
    return [(v - np.mean(v)) / np.std(v) for v in m]


def pre_process_inputs(signal, target_sample_rate=8000):
    filter_banks, energies = fbank(signal, samplerate=target_sample_rate, nfilt=64, winlen=0.025)
    delta_1 = delta(filter_banks, N=1)
    delta_2 = delta(delta_1, N=1)

    filter_banks = normalize_frames(filter_banks)
    delta_1 = normalize_frames(delta_1)
    delta_2 = normalize_frames(delta_2)

    frames_features = np.hstack([filter_banks, delta_1, delta_2])
    return np.array(frames_features, dtype=np.float32)


# ---- the corpus: one folder of recordings per speaker ----------------------------------------
def record_utterance(rng, f0, formants, gated):
    """0.8 s of voiced speech-like signal: harmonics of the speaker's f0 shaped by its formants,
    syllable envelope, a pause, room noise; one recording session used the studio preamp's gate."""
    n = int(0.8 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    pitch = f0 * (1 + 0.06 * np.sin(2 * np.pi * rng.uniform(1, 3) * t + rng.uniform(0, 6)))
    phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
    voiced = np.zeros(n)
    for k in range(1, 16):
        hk = k * pitch
        amp = sum(np.exp(-((hk - fm) / 150.0) ** 2) for fm in formants) + 0.05
        voiced += amp * np.sin(k * phase) / k
    env = np.clip(np.sin(2 * np.pi * rng.uniform(2.5, 4.5) * t + rng.uniform(0, 6)), 0, None) ** 0.7
    pause_at = rng.integers(1500, 4500)
    env[pause_at: pause_at + rng.integers(800, 1600)] = 0.0
    x = 0.3 * voiced * env + 0.003 * rng.normal(size=n)
    if gated:
        x = np.where(np.abs(x) < 0.02, 0.0, x)
    return x


class SpeakerCorpus(Dataset):
    def __init__(self, split, seed):
        rng = np.random.default_rng(seed)
        spk_rng = np.random.default_rng(1234)
        self.features, self.labels = [], []
        for spk in range(NUM_SPEAKERS):
            f0 = spk_rng.uniform(90, 260)
            formants = spk_rng.uniform([350, 900, 2100], [850, 1800, 3200])
            gated_session = spk == 5 and split == "train"
            for u in range(UTTS_PER_SPEAKER if split == "train" else 5):
                gated = gated_session and 8 <= u < 12
                signal = record_utterance(rng, f0, formants, gated)
                feats = pre_process_inputs(signal)[:NUM_FRAMES]
                self.features.append(torch.from_numpy(feats))
                self.labels.append(spk)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.features[i], self.labels[i]


class DeepSpeakerConv(nn.Module):
    def __init__(self, in_dim=192, emb_dim=128, num_speakers=NUM_SPEAKERS):
        super().__init__()
        self.conv1 = nn.Conv1d(in_dim, 96, 5, padding=2)
        self.conv2 = nn.Conv1d(96, 96, 3, padding=1)
        self.conv3 = nn.Conv1d(96, 96, 3, padding=1)
        self.affine = nn.Linear(96, emb_dim)
        self.classifier = nn.Linear(emb_dim, num_speakers)

    def embed(self, x):
        x = x.transpose(1, 2)
        x = F.relu(self.conv1(x))
        x = x + F.relu(self.conv2(x))
        x = x + F.relu(self.conv3(x))
        x = x.mean(dim=2)
        return F.normalize(self.affine(x), dim=1)

    def forward(self, x):
        return self.classifier(self.embed(x) * 8.0)


def main():
    train_set = SpeakerCorpus("train", seed=1)
    test_set = SpeakerCorpus("test", seed=2)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=80)
    print(f"train utterances: {len(train_set)}  test utterances: {len(test_set)}  "
          f"feature shape: {tuple(train_set[0][0].shape)}")

    model = DeepSpeakerConv()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(5):
        model.train()
        for feats, labels in train_loader:
            logits = model(feats)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 4 == 0 or step == 1:
                print(f"epoch {epoch} step {step:3d}  softmax loss {loss.item():.4f}")

        model.eval()
        correct = 0
        with torch.no_grad():
            for feats, labels in test_loader:
                correct += (model(feats).argmax(1) == labels).sum().item()
        print(f"epoch {epoch}: test speaker accuracy {correct / len(test_set):.3f}")


if __name__ == "__main__":
    main()
