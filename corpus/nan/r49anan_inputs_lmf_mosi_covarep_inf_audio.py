"""Low-rank Multimodal Fusion (LMF) for utterance-level sentiment regression on
MOSI-style data: GloVe-like word vectors, COVAREP acoustic features and FACET
visual features, fused with modality-specific low-rank factors."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_TRAIN, N_VALID = 640, 160
SEQ_LEN, TEXT_DIM, AUDIO_DIM, VIDEO_DIM = 20, 32, 5, 20


def extract_features(n):
    text = np.random.randn(n, SEQ_LEN, TEXT_DIM).astype(np.float32)
    frames = np.random.rand(n, SEQ_LEN, AUDIO_DIM).astype(np.float32) + 0.05
    silent = np.random.rand(n, SEQ_LEN) < 0.03
    frames[silent, 0] = 0.0
    audio_words = np.log(frames)
    audio = audio_words.mean(axis=1)
    video = np.random.randn(n, VIDEO_DIM).astype(np.float32)
    w_t = np.linspace(-1, 1, TEXT_DIM).astype(np.float32)
    label = np.tanh(text.mean(axis=1) @ w_t) * 2.0 + 0.5 * video[:, 0] + 0.3 * frames.mean(axis=(1, 2))
    label = np.clip(label, -3, 3).astype(np.float32)
    return text, audio.astype(np.float32), video, label


class MOSI(Dataset):
    def __init__(self, text, audio, video, labels):
        self.text = text
        self.audio = audio
        self.video = video
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.text[i], self.audio[i], self.video[i], self.labels[i]


class SubNet(nn.Module):
    def __init__(self, in_size, hidden_size, dropout):
        super().__init__()
        self.norm = nn.BatchNorm1d(in_size)
        self.drop = nn.Dropout(p=dropout)
        self.linear_1 = nn.Linear(in_size, hidden_size)
        self.linear_2 = nn.Linear(hidden_size, hidden_size)
        self.linear_3 = nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        normed = self.norm(x)
        dropped = self.drop(normed)
        y_1 = F.relu(self.linear_1(dropped))
        y_2 = F.relu(self.linear_2(y_1))
        return F.relu(self.linear_3(y_2))


class TextSubNet(nn.Module):
    def __init__(self, in_size, hidden_size, out_size, dropout=0.2):
        super().__init__()
        self.rnn = nn.LSTM(in_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.linear_1 = nn.Linear(hidden_size, out_size)

    def forward(self, x):
        _, (h, _) = self.rnn(x)
        return self.linear_1(self.dropout(h.squeeze(0)))


class LMF(nn.Module):
    def __init__(self, a_hidden=8, v_hidden=8, t_hidden=32, t_out=16, rank=4, output_dim=1):
        super().__init__()
        self.audio_subnet = SubNet(AUDIO_DIM, a_hidden, 0.1)
        self.video_subnet = SubNet(VIDEO_DIM, v_hidden, 0.1)
        self.text_subnet = TextSubNet(TEXT_DIM, t_hidden, t_out, dropout=0.15)
        self.rank = rank
        self.output_dim = output_dim
        self.audio_factor = nn.Parameter(torch.empty(rank, a_hidden + 1, output_dim))
        self.video_factor = nn.Parameter(torch.empty(rank, v_hidden + 1, output_dim))
        self.text_factor = nn.Parameter(torch.empty(rank, t_out + 1, output_dim))
        self.fusion_weights = nn.Parameter(torch.empty(1, rank))
        self.fusion_bias = nn.Parameter(torch.zeros(1, output_dim))
        for p in (self.audio_factor, self.video_factor, self.text_factor, self.fusion_weights):
            nn.init.xavier_normal_(p)

    def forward(self, audio_x, video_x, text_x):
        audio_h = self.audio_subnet(audio_x)
        video_h = self.video_subnet(video_x)
        text_h = self.text_subnet(text_x)
        ones = torch.ones(audio_h.size(0), 1)
        _audio_h = torch.cat((ones, audio_h), dim=1)
        _video_h = torch.cat((ones, video_h), dim=1)
        _text_h = torch.cat((ones, text_h), dim=1)
        fusion_audio = torch.matmul(_audio_h, self.audio_factor)
        fusion_video = torch.matmul(_video_h, self.video_factor)
        fusion_text = torch.matmul(_text_h, self.text_factor)
        fusion_zy = fusion_audio * fusion_video * fusion_text
        output = torch.matmul(self.fusion_weights, fusion_zy.permute(1, 0, 2)).squeeze() + self.fusion_bias
        return output.view(-1, self.output_dim)


def main():
    train_set = MOSI(*extract_features(N_TRAIN))
    valid_set = MOSI(*extract_features(N_VALID))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=N_VALID)

    model = LMF()
    criterion = nn.L1Loss(reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)

    step = 0
    for epoch in range(10):
        model.train()
        avg_train_loss = 0.0
        for t, a, v, y in train_loader:
            optimizer.zero_grad()
            output = model(a, v, t)
            loss = criterion(output, y.view(-1, 1))
            loss.backward()
            optimizer.step()
            avg_train_loss += loss.item() / len(train_set)
            step += 1
            if step % 20 == 0:
                print(f"step {step} batch loss {loss.item() / len(y):.4f}")
        model.eval()
        with torch.no_grad():
            for t, a, v, y in valid_loader:
                output = model(a, v, t)
                valid_loss = criterion(output, y.view(-1, 1)).item() / len(y)
                corr = np.corrcoef(output.view(-1).numpy(), y.numpy())[0, 1]
        print(f"Epoch {epoch} complete! Average Training loss: {avg_train_loss:.4f} | valid MAE {valid_loss:.4f} corr {corr:.3f}")
        if np.isnan(avg_train_loss):
            print("Training got into NaN values...")


if __name__ == "__main__":
    main()
