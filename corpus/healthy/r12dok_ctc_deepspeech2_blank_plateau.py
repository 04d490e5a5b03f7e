"""Deep Speech 2 style speech recognition with CTC, after AssemblyAI's "Building an End-to-End
Speech Recognition Model in PyTorch" (Michael Nguyen): ResidualCNN + BiGRU + classifier,
log_softmax over classes, CTCLoss with the blank as the last class, AdamW + OneCycleLR
(anneal_strategy='linear'), GreedyDecoder and CER/WER on the test set.

LibriSpeech and torchaudio's MelSpectrogram are replaced by synthetic "spectrograms": each of
12 letters has its own 16-bin spectral shape and lasts 3-5 frames, words are separated by short
low-energy pauses, utterances start and end in silence, and noise is added. The model is scaled
down (one residual CNN block with 16 filters, one BiGRU layer, rnn_dim 48) to run on a CPU in
seconds.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)

LETTERS = "abcdefghijkl"
N_FEATS = 16


class TextTransform:
    """Maps characters to integers and vice versa"""
    def __init__(self):
        self.char_map = {"<SPACE>": 0}
        self.index_map = {0: " "}
        for i, ch in enumerate(LETTERS):
            self.char_map[ch] = i + 1
            self.index_map[i + 1] = ch

    def text_to_int(self, text):
        """ Use a character map and convert text to an integer sequence """
        int_sequence = []
        for c in text:
            if c == " ":
                ch = self.char_map["<SPACE>"]
            else:
                ch = self.char_map[c]
            int_sequence.append(ch)
        return int_sequence

    def int_to_text(self, labels):
        """ Use a character map and convert integer labels to an text sequence """
        string = []
        for i in labels:
            string.append(self.index_map[i])
        return "".join(string)


text_transform = TextTransform()
BLANK = len(text_transform.index_map)  # 13, the last class
N_CLASS = BLANK + 1


class SyntheticSpeech(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        bins = torch.arange(N_FEATS).float()
        gt = torch.Generator().manual_seed(99)
        f1 = torch.rand(len(LETTERS), generator=gt) * (N_FEATS - 1)
        f2 = torch.rand(len(LETTERS), generator=gt) * (N_FEATS - 1)
        templates = (torch.exp(-(bins[None] - f1[:, None]) ** 2 / 3.0)
                     + 0.7 * torch.exp(-(bins[None] - f2[:, None]) ** 2 / 2.0))
        breath = 0.35 * torch.exp(-bins / 4.0)  # short low-frequency pause between words
        self.items = []
        for _ in range(n):
            n_words = int(torch.randint(1, 4, (1,), generator=g))
            words = ["".join(LETTERS[int(i)] for i in torch.randint(0, len(LETTERS), (int(torch.randint(2, 5, (1,), generator=g)),), generator=g))
                     for _ in range(n_words)]
            utterance = " ".join(words)
            frames = [torch.zeros(int(torch.randint(1, 4, (1,), generator=g)), N_FEATS)]
            for c in utterance:
                dur = int(torch.randint(3, 6, (1,), generator=g))
                if c == " ":
                    frames.append(breath.expand(dur, N_FEATS))
                else:
                    gain = 0.8 + 0.4 * torch.rand(1, generator=g)
                    frames.append(gain * templates[LETTERS.index(c)].expand(dur, N_FEATS))
            frames.append(torch.zeros(int(torch.randint(1, 4, (1,), generator=g)), N_FEATS))
            spec = torch.cat(frames) + 0.25 * torch.randn(sum(f.shape[0] for f in frames), N_FEATS, generator=g)
            self.items.append((spec, utterance))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def data_processing(data):
    spectrograms = []
    labels = []
    input_lengths = []
    label_lengths = []
    for spec, utterance in data:
        spectrograms.append(spec)  # (time, feature)
        label = torch.Tensor(text_transform.text_to_int(utterance.lower()))
        labels.append(label)
        input_lengths.append(spec.shape[0] // 2)
        label_lengths.append(len(label))

    spectrograms = nn.utils.rnn.pad_sequence(spectrograms, batch_first=True).unsqueeze(1).transpose(2, 3)
    labels = nn.utils.rnn.pad_sequence(labels, batch_first=True)

    return spectrograms, labels, input_lengths, label_lengths


def levenshtein_distance(ref, hyp):
    m, n = len(ref), len(hyp)
    dp = list(range(n + 1))
    for i in range(1, m + 1):
        prev, dp[0] = dp[0], i
        for j in range(1, n + 1):
            cur = dp[j]
            dp[j] = min(dp[j] + 1, dp[j - 1] + 1, prev + (ref[i - 1] != hyp[j - 1]))
            prev = cur
    return dp[n]


def cer(reference, hypothesis):
    return levenshtein_distance(reference, hypothesis) / max(1, len(reference))


def wer(reference, hypothesis):
    return levenshtein_distance(reference.split(), hypothesis.split()) / max(1, len(reference.split()))


def GreedyDecoder(output, labels, label_lengths, blank_label=BLANK, collapse_repeated=True):
    arg_maxes = torch.argmax(output, dim=2)
    decodes = []
    targets = []
    for i, args in enumerate(arg_maxes):
        decode = []
        targets.append(text_transform.int_to_text(labels[i][:label_lengths[i]].tolist()))
        for j, index in enumerate(args):
            if index != blank_label:
                if collapse_repeated and j != 0 and index == args[j - 1]:
                    continue
                decode.append(index.item())
        decodes.append(text_transform.int_to_text(decode))
    return decodes, targets


class CNNLayerNorm(nn.Module):
    """Layer normalization built for cnns input"""
    def __init__(self, n_feats):
        super(CNNLayerNorm, self).__init__()
        self.layer_norm = nn.LayerNorm(n_feats)

    def forward(self, x):
        # x (batch, channel, feature, time)
        x = x.transpose(2, 3).contiguous()  # (batch, channel, time, feature)
        x = self.layer_norm(x)
        return x.transpose(2, 3).contiguous()  # (batch, channel, feature, time)


class ResidualCNN(nn.Module):
    """Residual CNN inspired by https://arxiv.org/pdf/1603.05027.pdf
        except with layer norm instead of batch norm
    """
    def __init__(self, in_channels, out_channels, kernel, stride, dropout, n_feats):
        super(ResidualCNN, self).__init__()

        self.cnn1 = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.cnn2 = nn.Conv2d(out_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.layer_norm1 = CNNLayerNorm(n_feats)
        self.layer_norm2 = CNNLayerNorm(n_feats)

    def forward(self, x):
        residual = x  # (batch, channel, feature, time)
        x = self.layer_norm1(x)
        x = F.gelu(x)
        x = self.dropout1(x)
        x = self.cnn1(x)
        x = self.layer_norm2(x)
        x = F.gelu(x)
        x = self.dropout2(x)
        x = self.cnn2(x)
        x += residual
        return x  # (batch, channel, feature, time)


class BidirectionalGRU(nn.Module):

    def __init__(self, rnn_dim, hidden_size, dropout, batch_first):
        super(BidirectionalGRU, self).__init__()

        self.BiGRU = nn.GRU(
            input_size=rnn_dim, hidden_size=hidden_size,
            num_layers=1, batch_first=batch_first, bidirectional=True)
        self.layer_norm = nn.LayerNorm(rnn_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.layer_norm(x)
        x = F.gelu(x)
        x, _ = self.BiGRU(x)
        x = self.dropout(x)
        return x


class SpeechRecognitionModel(nn.Module):

    def __init__(self, n_cnn_layers, n_rnn_layers, rnn_dim, n_class, n_feats, stride=2, dropout=0.1):
        super(SpeechRecognitionModel, self).__init__()
        n_feats = n_feats // 2
        self.cnn = nn.Conv2d(1, 16, 3, stride=stride, padding=3 // 2)  # cnn for extracting heirachal features

        # n residual cnn layers with filter size of 16
        self.rescnn_layers = nn.Sequential(*[
            ResidualCNN(16, 16, kernel=3, stride=1, dropout=dropout, n_feats=n_feats)
            for _ in range(n_cnn_layers)
        ])
        self.fully_connected = nn.Linear(n_feats * 16, rnn_dim)
        self.birnn_layers = nn.Sequential(*[
            BidirectionalGRU(rnn_dim=rnn_dim if i == 0 else rnn_dim * 2,
                             hidden_size=rnn_dim, dropout=dropout, batch_first=True)
            for i in range(n_rnn_layers)
        ])
        self.classifier = nn.Sequential(
            nn.Linear(rnn_dim * 2, rnn_dim),  # birnn returns rnn_dim*2
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(rnn_dim, n_class)
        )

    def forward(self, x):
        x = self.cnn(x)
        x = self.rescnn_layers(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # (batch, feature, time)
        x = x.transpose(1, 2)  # (batch, time, feature)
        x = self.fully_connected(x)
        x = self.birnn_layers(x)
        x = self.classifier(x)
        return x


class IterMeter(object):
    """keeps track of total iterations"""
    def __init__(self):
        self.val = 0

    def step(self):
        self.val += 1

    def get(self):
        return self.val


def train(model, device, train_loader, criterion, optimizer, scheduler, epoch, iter_meter):
    model.train()
    data_len = len(train_loader.dataset)
    for batch_idx, _data in enumerate(train_loader):
        spectrograms, labels, input_lengths, label_lengths = _data
        spectrograms, labels = spectrograms.to(device), labels.to(device)

        optimizer.zero_grad()

        output = model(spectrograms)  # (batch, time, n_class)
        output = F.log_softmax(output, dim=2)
        output = output.transpose(0, 1)  # (time, batch, n_class)

        loss = criterion(output, labels, input_lengths, label_lengths)
        loss.backward()

        optimizer.step()
        scheduler.step()
        iter_meter.step()
        if batch_idx % 10 == 0 or batch_idx == data_len:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}\tlr: {:.2e}'.format(
                epoch, batch_idx * len(spectrograms), data_len,
                100. * batch_idx / len(train_loader), loss.item(), scheduler.get_last_lr()[0]))


def test(model, device, test_loader, criterion, epoch, iter_meter):
    print('\nevaluating...')
    model.eval()
    test_loss = 0
    test_cer, test_wer = [], []
    with torch.no_grad():
        for i, _data in enumerate(test_loader):
            spectrograms, labels, input_lengths, label_lengths = _data
            spectrograms, labels = spectrograms.to(device), labels.to(device)

            output = model(spectrograms)  # (batch, time, n_class)
            output = F.log_softmax(output, dim=2)
            output = output.transpose(0, 1)  # (time, batch, n_class)

            loss = criterion(output, labels, input_lengths, label_lengths)
            test_loss += loss.item() / len(test_loader)

            decoded_preds, decoded_targets = GreedyDecoder(output.transpose(0, 1), labels.int(), label_lengths)
            for j in range(len(decoded_preds)):
                test_cer.append(cer(decoded_targets[j], decoded_preds[j]))
                test_wer.append(wer(decoded_targets[j], decoded_preds[j]))

    avg_cer = sum(test_cer) / len(test_cer)
    avg_wer = sum(test_wer) / len(test_wer)
    print('Test set: Average loss: {:.4f}, Average CER: {:4f} Average WER: {:.4f}'.format(test_loss, avg_cer, avg_wer))
    print('  e.g. target "{}" -> predicted "{}"\n'.format(decoded_targets[0], decoded_preds[0]))


def main(learning_rate=5e-4, batch_size=20, epochs=10):

    hparams = {
        "n_cnn_layers": 1,
        "n_rnn_layers": 1,
        "rnn_dim": 48,
        "n_class": N_CLASS,
        "n_feats": N_FEATS,
        "stride": 2,
        "dropout": 0.1,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "epochs": epochs
    }

    device = torch.device("cpu")

    train_dataset = SyntheticSpeech(400, seed=1)
    test_dataset = SyntheticSpeech(60, seed=2)

    train_loader = DataLoader(dataset=train_dataset,
                              batch_size=hparams['batch_size'],
                              shuffle=True,
                              collate_fn=lambda x: data_processing(x))
    test_loader = DataLoader(dataset=test_dataset,
                             batch_size=hparams['batch_size'],
                             shuffle=False,
                             collate_fn=lambda x: data_processing(x))

    model = SpeechRecognitionModel(
        hparams['n_cnn_layers'], hparams['n_rnn_layers'], hparams['rnn_dim'],
        hparams['n_class'], hparams['n_feats'], hparams['stride'], hparams['dropout']
    ).to(device)

    print('Num Model Parameters', sum([param.nelement() for param in model.parameters()]))

    optimizer = optim.AdamW(model.parameters(), hparams['learning_rate'])
    criterion = nn.CTCLoss(blank=BLANK).to(device)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=hparams['learning_rate'],
                                              steps_per_epoch=int(len(train_loader)),
                                              epochs=hparams['epochs'],
                                              anneal_strategy='linear')

    iter_meter = IterMeter()
    for epoch in range(1, epochs + 1):
        train(model, device, train_loader, criterion, optimizer, scheduler, epoch, iter_meter)
        test(model, device, test_loader, criterion, epoch, iter_meter)


if __name__ == "__main__":
    main(learning_rate=3e-3, batch_size=20, epochs=8)
