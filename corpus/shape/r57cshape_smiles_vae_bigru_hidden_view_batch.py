"""SMILES VAE in the style of paccmann_chemistry: a bidirectional stacked-GRU encoder
gives mu/logvar from its final hidden state, a GRU decoder reconstructs the SMILES
with teacher forcing. Trained on a synthetic fragment-based SMILES corpus.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

FRAGMENTS = ['C(=O)O', 'CCN', 'OC', 'C#N', 'Cl', 'N(C)C', 'CC(C)', 'Br',
             'C=C', 'OCCO', 'C(=O)N', 'S', 'c1cc1', 'F', 'CO', 'NC(=N)']
TOKENS = ['<pad>', '<start>', '<stop>'] + sorted(set(''.join(FRAGMENTS)))
STOI = {t: i for i, t in enumerate(TOKENS)}

params = {
    'vocab_size': len(TOKENS),
    'embedding_size': 24,
    'rnn_cell_size': 48,
    'n_layers': 1,
    'bidirectional': True,
    'latent_dim': 24,
    'batch_size': 32,
    'dropout': 0.0,
    'lr': 3e-3,
    'kl_weight': 0.005,
    'epochs': 2,
}


def random_smiles(gen, n_fragments=3):
    idx = torch.randint(0, len(FRAGMENTS), (n_fragments,), generator=gen).tolist()
    return ''.join(FRAGMENTS[i] for i in idx)


class SMILESDataset(Dataset):
    def __init__(self, n, seed):
        gen = torch.Generator().manual_seed(seed)
        self.smiles = [random_smiles(gen) for _ in range(n)]

    def __len__(self):
        return len(self.smiles)

    def __getitem__(self, i):
        ids = [STOI['<start>']] + [STOI[c] for c in self.smiles[i]] + [STOI['<stop>']]
        return torch.tensor(ids)


def collate_smiles(batch):
    return nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=STOI['<pad>'])


class StackGRUEncoder(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.batch_size = params['batch_size']
        self.n_layers = params['n_layers']
        self.n_directions = 2 if params['bidirectional'] else 1
        self.rnn_cell_size = params['rnn_cell_size']
        self.embedding = nn.Embedding(params['vocab_size'], params['embedding_size'], padding_idx=0)
        self.gru = nn.GRU(params['embedding_size'], self.rnn_cell_size, self.n_layers,
                          bidirectional=params['bidirectional'], dropout=params['dropout'])
        self.hidden_to_mu = nn.Linear(self.rnn_cell_size * self.n_directions, params['latent_dim'])
        self.hidden_to_logvar = nn.Linear(self.rnn_cell_size * self.n_directions, params['latent_dim'])

    def forward(self, input_seq):
        # input_seq: [seq_len, batch_size]
        embedded = self.embedding(input_seq)
        _, hidden = self.gru(embedded)
        # Reshape to disentangle layers and directions
        hidden = hidden.view(self.n_layers, self.n_directions, self.batch_size, self.rnn_cell_size)
        # Discard all but last layer, concatenate forward/backward
        hidden = hidden[-1, :, :, :].view(self.batch_size, self.rnn_cell_size * self.n_directions)
        return self.hidden_to_mu(hidden), self.hidden_to_logvar(hidden)


class StackGRUDecoder(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.n_layers = params['n_layers']
        self.embedding = nn.Embedding(params['vocab_size'], params['embedding_size'], padding_idx=0)
        self.latent_to_hidden = nn.Linear(params['latent_dim'], params['rnn_cell_size'])
        self.gru = nn.GRU(params['embedding_size'], params['rnn_cell_size'], self.n_layers)
        self.output_layer = nn.Linear(params['rnn_cell_size'], params['vocab_size'])

    def forward(self, latent_z, input_seq):
        hidden = self.latent_to_hidden(latent_z).unsqueeze(0).repeat(self.n_layers, 1, 1)
        output, _ = self.gru(self.embedding(input_seq), hidden)
        return self.output_layer(output)


class TeacherVAE(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def forward(self, input_seq, decoder_input):
        mu, logvar = self.encoder(input_seq)
        z = self.reparameterize(mu, logvar) if self.training else mu
        return self.decoder(z, decoder_input), mu, logvar


def vae_loss(logits, target_seq, mu, logvar, kl_weight):
    rec = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target_seq.reshape(-1), ignore_index=0)
    kld = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))
    return rec + kl_weight * kld, rec, kld


def sequential_data_preparation(batch):
    seq = batch.t().contiguous()          # [seq_len, batch]
    return seq[1:], seq[:-1], seq[1:]     # encoder input, decoder input, decoder target


train_loader = DataLoader(SMILESDataset(3200, 1), batch_size=params['batch_size'], shuffle=True,
                          drop_last=True, collate_fn=collate_smiles)
val_loader = DataLoader(SMILESDataset(640, 2), batch_size=params['batch_size'], shuffle=False,
                        drop_last=True, collate_fn=collate_smiles)

vae = TeacherVAE(StackGRUEncoder(params), StackGRUDecoder(params))
optimizer = torch.optim.Adam(vae.parameters(), lr=params['lr'])

step = 0
for epoch in range(params['epochs']):
    vae.train()
    for batch in train_loader:
        encoder_seq, decoder_seq, target_seq = sequential_data_preparation(batch)
        logits, mu, logvar = vae(encoder_seq, decoder_seq)
        loss, rec, kld = vae_loss(logits, target_seq, mu, logvar, params['kl_weight'])
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(vae.parameters(), 2.0)
        optimizer.step()
        step += 1
        if step % 25 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f} rec {rec.item():.4f} kld {kld.item():.3f}")

    vae.eval()
    correct, total, exact, n_mol, val_rec = 0, 0, 0, 0, 0.0
    with torch.no_grad():
        for batch in val_loader:
            encoder_seq, decoder_seq, target_seq = sequential_data_preparation(batch)
            logits, mu, logvar = vae(encoder_seq, decoder_seq)
            val_rec += vae_loss(logits, target_seq, mu, logvar, 0.0)[1].item()
            mask = target_seq != 0
            hit = (logits.argmax(-1) == target_seq) | ~mask
            correct += (hit & mask).sum().item()
            total += mask.sum().item()
            exact += hit.all(dim=0).sum().item()
            n_mol += target_seq.size(1)
    print(f"epoch {epoch} val rec {val_rec / len(val_loader):.4f} "
          f"token acc {correct / total:.3f} exact {exact / n_mol:.3f}")
