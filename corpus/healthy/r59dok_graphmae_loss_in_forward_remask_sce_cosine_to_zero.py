"""GraphMAE (Hou et al., KDD 2022): a masked graph autoencoder pre-trained on a citation
graph by reconstructing the features of masked nodes with the scaled cosine error, then
evaluated by a linear probe on the frozen node embeddings (main_transductive.py, Cora
settings scaled down). The graph is a Cora-like stochastic block model made in the script:
7 topics, sparse bag-of-words features, 20 labelled nodes per class."""
import copy
from functools import partial
from itertools import chain

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def create_activation(name):
    if name == "relu":
        return nn.ReLU()
    elif name == "prelu":
        return nn.PReLU()
    elif name is None:
        return nn.Identity()
    elif name == "elu":
        return nn.ELU()
    else:
        raise NotImplementedError(f"{name} is not implemented.")


def create_norm(name):
    if name == "layernorm":
        return nn.LayerNorm
    elif name == "batchnorm":
        return nn.BatchNorm1d
    else:
        return nn.Identity


def accuracy(y_pred, y_true):
    y_true = y_true.squeeze().long()
    preds = y_pred.max(1)[1].type_as(y_true)
    correct = preds.eq(y_true).double()
    correct = correct.sum().item()
    return correct / len(y_true)


class Graph:
    """Just enough of a DGLGraph: edge lists (src -> dst) and node data."""

    def __init__(self, src, dst, num_nodes):
        self.src, self.dst = src, dst
        self._num_nodes = num_nodes
        self.ndata = {}

    def num_nodes(self):
        return self._num_nodes

    def num_edges(self):
        return self.src.numel()

    def in_degrees(self):
        return torch.bincount(self.dst, minlength=self._num_nodes)

    def clone(self):
        g = Graph(self.src.clone(), self.dst.clone(), self._num_nodes)
        g.ndata = dict(self.ndata)
        return g


def edge_softmax(graph, e):
    idx = graph.dst.unsqueeze(1).expand_as(e)
    e_max = torch.full((graph.num_nodes(), e.size(1)), float('-inf')).scatter_reduce(0, idx, e, reduce='amax')
    e = torch.exp(e - e_max[graph.dst])
    denom = torch.zeros(graph.num_nodes(), e.size(1)).index_add_(0, graph.dst, e)
    return e / denom[graph.dst]


class GATConv(nn.Module):
    def __init__(self, in_feats, out_feats, num_heads, feat_drop=0., attn_drop=0., negative_slope=0.2,
                 residual=False, activation=None, bias=True, norm=None, concat_out=True):
        super(GATConv, self).__init__()
        self._num_heads = num_heads
        self._out_feats = out_feats
        self._concat_out = concat_out
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.FloatTensor(size=(1, num_heads, out_feats)))
        self.attn_r = nn.Parameter(torch.FloatTensor(size=(1, num_heads, out_feats)))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        if bias:
            self.bias = nn.Parameter(torch.FloatTensor(size=(num_heads * out_feats,)))
        else:
            self.register_buffer('bias', None)
        if residual:
            if in_feats != out_feats * num_heads:
                self.res_fc = nn.Linear(in_feats, num_heads * out_feats, bias=False)
            else:
                self.res_fc = nn.Identity()
        else:
            self.register_buffer('res_fc', None)
        self.reset_parameters()
        self.activation = activation
        self.norm = norm
        if norm is not None:
            self.norm = norm(num_heads * out_feats)

    def reset_parameters(self):
        gain = nn.init.calculate_gain('relu')
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.bias is not None:
            nn.init.constant_(self.bias, 0)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)

    def forward(self, graph, feat):
        if (graph.in_degrees() == 0).any():
            raise RuntimeError('There are 0-in-degree nodes in the graph')
        h_src = h_dst = self.feat_drop(feat)
        feat_src = self.fc(h_src).view(-1, self._num_heads, self._out_feats)       # N x H x F
        el = (feat_src * self.attn_l).sum(dim=-1).unsqueeze(-1)                     # N x H x 1
        er = (feat_src * self.attn_r).sum(dim=-1).unsqueeze(-1)
        e = self.leaky_relu(el[graph.src] + er[graph.dst])                         # E x H x 1
        a = self.attn_drop(edge_softmax(graph, e.squeeze(-1))).unsqueeze(-1)
        m = feat_src[graph.src] * a                                                 # u_mul_e
        rst = torch.zeros_like(feat_src).index_add_(0, graph.dst, m)               # sum at dst
        if self.bias is not None:
            rst = rst + self.bias.view(1, self._num_heads, self._out_feats)
        if self.res_fc is not None:
            resval = self.res_fc(h_dst).view(h_dst.shape[0], -1, self._out_feats)
            rst = rst + resval
        if self._concat_out:
            rst = rst.flatten(1)
        else:
            rst = torch.mean(rst, dim=1)
        if self.norm is not None:
            rst = self.norm(rst)
        if self.activation:
            rst = self.activation(rst)
        return rst


class GAT(nn.Module):
    def __init__(self, in_dim, num_hidden, out_dim, num_layers, nhead, nhead_out, activation, feat_drop,
                 attn_drop, negative_slope, residual, norm, concat_out=False, encoding=False):
        super(GAT, self).__init__()
        self.out_dim = out_dim
        self.num_heads = nhead
        self.num_layers = num_layers
        self.gat_layers = nn.ModuleList()
        self.activation = activation
        self.concat_out = concat_out

        last_activation = create_activation(activation) if encoding else None
        last_residual = (encoding and residual)
        last_norm = norm if encoding else None

        if num_layers == 1:
            self.gat_layers.append(GATConv(
                in_dim, out_dim, nhead_out,
                feat_drop, attn_drop, negative_slope, last_residual, norm=last_norm, concat_out=concat_out))
        else:
            self.gat_layers.append(GATConv(
                in_dim, num_hidden, nhead,
                feat_drop, attn_drop, negative_slope, residual, create_activation(activation), norm=norm, concat_out=concat_out))
            for l in range(1, num_layers - 1):
                self.gat_layers.append(GATConv(
                    num_hidden * nhead, num_hidden, nhead,
                    feat_drop, attn_drop, negative_slope, residual, create_activation(activation), norm=norm, concat_out=concat_out))
            self.gat_layers.append(GATConv(
                num_hidden * nhead, out_dim, nhead_out,
                feat_drop, attn_drop, negative_slope, last_residual, activation=last_activation, norm=last_norm, concat_out=concat_out))
        self.head = nn.Identity()

    def forward(self, g, inputs, return_hidden=False):
        h = inputs
        hidden_list = []
        for l in range(self.num_layers):
            h = self.gat_layers[l](g, h)
            hidden_list.append(h)
        if return_hidden:
            return self.head(h), hidden_list
        else:
            return self.head(h)


def sce_loss(x, y, alpha=3):
    x = F.normalize(x, p=2, dim=-1)
    y = F.normalize(y, p=2, dim=-1)
    loss = (1 - (x * y).sum(dim=-1)).pow_(alpha)
    loss = loss.mean()
    return loss


class PreModel(nn.Module):
    def __init__(self, in_dim, num_hidden, num_layers, nhead, nhead_out, activation, feat_drop, attn_drop,
                 negative_slope, residual, norm, mask_rate=0.3, loss_fn="sce", replace_rate=0.1, alpha_l=2):
        super(PreModel, self).__init__()
        self._mask_rate = mask_rate
        self._output_hidden_size = num_hidden
        self._replace_rate = replace_rate
        self._mask_token_rate = 1 - self._replace_rate

        assert num_hidden % nhead == 0
        assert num_hidden % nhead_out == 0
        enc_num_hidden = num_hidden // nhead
        enc_nhead = nhead
        dec_in_dim = num_hidden
        dec_num_hidden = num_hidden // nhead_out

        self.encoder = GAT(in_dim=in_dim, num_hidden=enc_num_hidden, out_dim=enc_num_hidden, num_layers=num_layers,
                           nhead=enc_nhead, nhead_out=enc_nhead, concat_out=True, activation=activation,
                           feat_drop=feat_drop, attn_drop=attn_drop, negative_slope=negative_slope,
                           residual=residual, norm=create_norm(norm), encoding=True)
        self.decoder = GAT(in_dim=dec_in_dim, num_hidden=dec_num_hidden, out_dim=in_dim, num_layers=1,
                           nhead=nhead, nhead_out=nhead_out, activation=activation, feat_drop=feat_drop,
                           attn_drop=attn_drop, negative_slope=negative_slope, residual=residual,
                           norm=create_norm(norm), concat_out=True, encoding=False)

        self.enc_mask_token = nn.Parameter(torch.zeros(1, in_dim))
        self.encoder_to_decoder = nn.Linear(dec_in_dim, dec_in_dim, bias=False)
        self.criterion = self.setup_loss_fn(loss_fn, alpha_l)

    def setup_loss_fn(self, loss_fn, alpha_l):
        if loss_fn == "mse":
            criterion = nn.MSELoss()
        elif loss_fn == "sce":
            criterion = partial(sce_loss, alpha=alpha_l)
        else:
            raise NotImplementedError
        return criterion

    def encoding_mask_noise(self, g, x, mask_rate=0.3):
        num_nodes = g.num_nodes()
        perm = torch.randperm(num_nodes, device=x.device)
        num_mask_nodes = int(mask_rate * num_nodes)
        mask_nodes = perm[: num_mask_nodes]
        keep_nodes = perm[num_mask_nodes:]

        if self._replace_rate > 0:
            num_noise_nodes = int(self._replace_rate * num_mask_nodes)
            perm_mask = torch.randperm(num_mask_nodes, device=x.device)
            token_nodes = mask_nodes[perm_mask[: int(self._mask_token_rate * num_mask_nodes)]]
            noise_nodes = mask_nodes[perm_mask[-int(self._replace_rate * num_mask_nodes):]]
            noise_to_be_chosen = torch.randperm(num_nodes, device=x.device)[:num_noise_nodes]

            out_x = x.clone()
            out_x[token_nodes] = 0.0
            out_x[noise_nodes] = x[noise_to_be_chosen]
        else:
            out_x = x.clone()
            token_nodes = mask_nodes
            out_x[mask_nodes] = 0.0

        out_x[token_nodes] += self.enc_mask_token
        use_g = g.clone()
        return use_g, out_x, (mask_nodes, keep_nodes)

    def forward(self, g, x):
        loss = self.mask_attr_prediction(g, x)
        loss_item = {"loss": loss.item()}
        return loss, loss_item

    def mask_attr_prediction(self, g, x):
        pre_use_g, use_x, (mask_nodes, keep_nodes) = self.encoding_mask_noise(g, x, self._mask_rate)
        use_g = pre_use_g

        enc_rep, all_hidden = self.encoder(use_g, use_x, return_hidden=True)

        rep = self.encoder_to_decoder(enc_rep)
        rep[mask_nodes] = 0

        recon = self.decoder(pre_use_g, rep)

        x_init = x[mask_nodes]
        x_rec = recon[mask_nodes]

        loss = self.criterion(x_rec, x_init)
        return loss

    def embed(self, g, x):
        rep = self.encoder(g, x)
        return rep

    @property
    def enc_params(self):
        return self.encoder.parameters()

    @property
    def dec_params(self):
        return chain(*[self.encoder_to_decoder.parameters(), self.decoder.parameters()])


class LogisticRegression(nn.Module):
    def __init__(self, num_dim, num_class):
        super().__init__()
        self.linear = nn.Linear(num_dim, num_class)

    def forward(self, g, x, *args):
        logits = self.linear(x)
        return logits


def linear_probing_for_transductive_node_classiifcation(model, graph, feat, optimizer, max_epoch, mute=False):
    criterion = torch.nn.CrossEntropyLoss()
    x = feat
    train_mask = graph.ndata["train_mask"]
    val_mask = graph.ndata["val_mask"]
    test_mask = graph.ndata["test_mask"]
    labels = graph.ndata["label"]

    best_val_acc = 0
    best_val_epoch = 0
    best_model = None

    for epoch in range(max_epoch):
        model.train()
        out = model(graph, x)
        loss = criterion(out[train_mask], labels[train_mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        with torch.no_grad():
            model.eval()
            pred = model(graph, x)
            val_acc = accuracy(pred[val_mask], labels[val_mask])
            test_acc = accuracy(pred[test_mask], labels[test_mask])

        if val_acc >= best_val_acc:
            best_val_acc = val_acc
            best_val_epoch = epoch
            best_model = copy.deepcopy(model)

        if not mute and epoch % 100 == 0:
            print(f"# Epoch: {epoch}, train_loss:{loss.item(): .4f}, val_acc:{val_acc:.4f}, test_acc:{test_acc: .4f}")

    best_model.eval()
    with torch.no_grad():
        pred = best_model(graph, x)
        estp_test_acc = accuracy(pred[test_mask], labels[test_mask])
    prefix = "# IGNORE: " if mute else ""
    print(f"{prefix}--- TestAcc: {test_acc:.4f}, early-stopping-TestAcc: {estp_test_acc:.4f}, Best ValAcc: {best_val_acc:.4f} in epoch {best_val_epoch} --- ")
    return test_acc, estp_test_acc


def node_classification_evaluation(model, graph, x, num_classes, lr_f, weight_decay_f, max_epoch_f, mute=False):
    model.eval()
    with torch.no_grad():
        x = model.embed(graph, x)
        in_feat = x.shape[1]
    encoder = LogisticRegression(in_feat, num_classes)
    optimizer_f = torch.optim.Adam(encoder.parameters(), lr=lr_f, weight_decay=weight_decay_f)
    return linear_probing_for_transductive_node_classiifcation(encoder, graph, x, optimizer_f, max_epoch_f, mute)


class PrintLogger:
    def __init__(self, every=20):
        self.every = every

    def note(self, metrics, step):
        if step % self.every == 0:
            print(f"# Epoch {step}: " + ", ".join(f"{k}: {v:.4f}" for k, v in metrics.items()))


def get_current_lr(optimizer):
    return optimizer.state_dict()["param_groups"][0]["lr"]


def pretrain(model, graph, feat, optimizer, max_epoch, scheduler, num_classes, lr_f, weight_decay_f, max_epoch_f, logger=None):
    print("start training..")
    x = feat
    for epoch in range(max_epoch):
        model.train()

        loss, loss_dict = model(graph, x)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()

        if logger is not None:
            loss_dict["lr"] = get_current_lr(optimizer)
            logger.note(loss_dict, step=epoch)

        if (epoch + 1) % 200 == 0:
            node_classification_evaluation(model, graph, x, num_classes, lr_f, weight_decay_f, max_epoch_f, mute=True)
    return model


def make_cora_like(num_nodes=560, num_classes=7, num_feats=200, rng=None):
    labels = np.repeat(np.arange(num_classes), num_nodes // num_classes)
    rng.shuffle(labels)
    same = labels[:, None] == labels[None, :]
    prob = np.where(same, 0.028, 0.0012)
    upper = np.triu(rng.random((num_nodes, num_nodes)) < prob, 1)
    adj = (upper | upper.T).astype(np.float32)
    adj[np.arange(num_nodes), np.arange(num_nodes)] = 0.0   # remove_self_loop()
    adj[np.arange(num_nodes), np.arange(num_nodes)] = 1.0   # add_self_loop()

    topics = rng.dirichlet(np.full(num_feats, 0.08), size=num_classes)
    background = np.full(num_feats, 1.0 / num_feats)
    feats = np.zeros((num_nodes, num_feats), dtype=np.float32)
    for i in range(num_nodes):
        n_words = rng.integers(8, 20)
        p = 0.5 * topics[labels[i]] + 0.5 * background
        words = rng.choice(num_feats, size=n_words, p=p)
        feats[i, words] = 1.0
    feats = feats / feats.sum(1, keepdims=True)

    dst, src = np.nonzero(adj)
    g = Graph(torch.from_numpy(src).long(), torch.from_numpy(dst).long(), num_nodes)
    g.ndata["feat"] = torch.from_numpy(feats)
    g.ndata["label"] = torch.from_numpy(labels)
    idx = rng.permutation(num_nodes)
    train_idx = np.concatenate([idx[labels[idx] == c][:20] for c in range(num_classes)])
    rest = np.setdiff1d(idx, train_idx)
    rest = rng.permutation(rest)
    val_idx, test_idx = rest[:140], rest[140:]
    for name, ids in (("train_mask", train_idx), ("val_mask", val_idx), ("test_mask", test_idx)):
        m = torch.zeros(num_nodes, dtype=torch.bool)
        m[torch.from_numpy(ids)] = True
        g.ndata[name] = m
    return g, (num_feats, num_classes)


def main():
    seed = 0
    np.random.seed(seed)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)

    max_epoch = 200
    max_epoch_f = 300
    lr, weight_decay = 0.001, 2e-4
    lr_f, weight_decay_f = 0.01, 1e-4

    graph, (num_features, num_classes) = make_cora_like(rng=rng)
    lab = graph.ndata["label"]
    not_loop = graph.src != graph.dst
    print(f"nodes {graph.num_nodes()}, edges {int(not_loop.sum())} (+{graph.num_nodes()} self-loops), "
          f"homophily {(lab[graph.src] == lab[graph.dst])[not_loop].float().mean().item():.2f}")

    model = PreModel(in_dim=num_features, num_hidden=64, num_layers=2, nhead=4, nhead_out=1, activation="prelu",
                     feat_drop=0.2, attn_drop=0.1, negative_slope=0.2, residual=False, norm=None,
                     mask_rate=0.5, loss_fn="sce", replace_rate=0.05, alpha_l=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = lambda epoch: (1 + np.cos((epoch) * np.pi / max_epoch)) * 0.5
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=scheduler)

    x = graph.ndata["feat"]
    print("linear probe on the untrained encoder:")
    node_classification_evaluation(model, graph, x, num_classes, lr_f, weight_decay_f, max_epoch_f, mute=True)

    model = pretrain(model, graph, x, optimizer, max_epoch, scheduler, num_classes, lr_f, weight_decay_f, max_epoch_f, PrintLogger())

    model.eval()
    final_acc, estp_acc = node_classification_evaluation(model, graph, x, num_classes, lr_f, weight_decay_f, max_epoch_f)
    print(f"# final_acc: {final_acc:.4f}")
    print(f"# early-stopping_acc: {estp_acc:.4f}")


if __name__ == "__main__":
    main()
