"""NeuMF (GMF + MLP) for implicit feedback, trained point-wise ("CL" loss) with Lightning.

Interactions are sampled from a synthetic user/item taste model: a user
clicks an item when their hidden tastes agree, so the click is learnable from
the user and item ids alone.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

config = {
    'user_num': 300,
    'item_num': 200,
    'factors': 16,
    'num_layers': 2,
    'dropout': 0.0,
    'lr': 0.005,
    'epochs': 4,
    'batch_size': 256,
    'model_name': 'NeuMF-end',
}


def make_interactions(n, user_num, item_num, seed=0):
    g = torch.Generator().manual_seed(seed)
    taste_u = torch.randn(user_num, 4, generator=g)
    taste_i = torch.randn(item_num, 4, generator=g)
    users = torch.randint(0, user_num, (n,), generator=g)
    items = torch.randint(0, item_num, (n,), generator=g)
    score = (taste_u[users] * taste_i[items]).sum(1)
    labels = (score + 0.3 * torch.randn(n, generator=g) > 0).float()
    return users, items, labels


class NeuMF(L.LightningModule):
    def __init__(self, config):
        super().__init__()
        self.lr = config['lr']
        self.model = config['model_name']
        factors, num_layers = config['factors'], config['num_layers']

        self.embed_user_GMF = nn.Embedding(config['user_num'], factors)
        self.embed_item_GMF = nn.Embedding(config['item_num'], factors)
        self.embed_user_MLP = nn.Embedding(config['user_num'], factors * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(config['item_num'], factors * (2 ** (num_layers - 1)))

        MLP_modules = []
        for i in range(num_layers):
            input_size = factors * (2 ** (num_layers - i))
            MLP_modules.append(nn.Dropout(p=config['dropout']))
            MLP_modules.append(nn.Linear(input_size, input_size // 2))
            MLP_modules.append(nn.ReLU())
        self.MLP_layers = nn.Sequential(*MLP_modules)

        self.predict_layer = nn.Linear(factors * 2, 1)
        self.criterion = nn.BCEWithLogitsLoss()
        self._init_weight()

    def _init_weight(self):
        for emb in (self.embed_user_GMF, self.embed_item_GMF, self.embed_user_MLP, self.embed_item_MLP):
            nn.init.normal_(emb.weight, std=0.01)
        for m in self.MLP_layers:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
        nn.init.kaiming_uniform_(self.predict_layer.weight, a=1, nonlinearity='sigmoid')
        for m in self.modules():
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.data.zero_()

    def forward(self, user, item):
        output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
        interaction = torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), dim=-1)
        output_MLP = self.MLP_layers(interaction)
        concat = torch.cat((output_GMF, output_MLP), -1)
        prediction = self.predict_layer(concat)
        return torch.sigmoid(prediction.view(-1))

    def training_step(self, batch, batch_idx):
        user, item, label = batch
        prediction = self.forward(user, item)
        loss = self.criterion(prediction, label)
        acc = ((prediction > 0.5).float() == label).float().mean()
        self.log('train_loss', loss, prog_bar=True)
        if batch_idx % 10 == 0:
            print(f'epoch {self.current_epoch} step {self.global_step:4d}  loss {loss.item():.4f}  acc {acc.item():.3f}')
        return loss

    def validation_step(self, batch, batch_idx):
        user, item, label = batch
        prediction = self.forward(user, item)
        self.log('val_loss', self.criterion(prediction, label))
        self.log('val_acc', ((prediction > 0.5).float() == label).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if 'val_loss' in m:
            print(f'== epoch {self.current_epoch}: val_loss {m["val_loss"]:.4f}  val_acc {m["val_acc"]:.3f}')

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def main():
    L.seed_everything(2023)
    users, items, labels = make_interactions(14000, config['user_num'], config['item_num'])
    train = TensorDataset(users[:12000], items[:12000], labels[:12000])
    valid = TensorDataset(users[12000:], items[12000:], labels[12000:])
    train_loader = DataLoader(train, batch_size=config['batch_size'], shuffle=True)
    valid_loader = DataLoader(valid, batch_size=1000)

    model = NeuMF(config)
    trainer = L.Trainer(
        max_epochs=config['epochs'],
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, train_loader, valid_loader)


if __name__ == '__main__':
    main()
