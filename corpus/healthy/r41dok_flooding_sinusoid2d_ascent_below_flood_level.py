"""Flooding regularizer demo on the two-dimensional sinusoid data set, following
takashiishida/flooding (synthetic/demo_synth.py with utils/models.py mlp_model and
synthetic/sinusoid.py Sinusoid2dimDataNumpy): 4-layer BatchNorm MLP, mean cross-entropy,
loss = (loss - b).abs() + b with flood level b, SGD momentum 0.9, 10% label noise on the
training and validation labels. Each evaluation reports loss/accuracy on the noisy splits and
the accuracy on the clean test labels, plus the proportion of flooded mini-batches.
"""
import argparse
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Sinusoid2dimDataNumpy:
    def __init__(self, label_noise=0.1, n_tr=50, n_va=10, n_te=20000):
        self.n_tr, self.n_va, self.n_te = n_tr, n_va, n_te
        self.label_noise = label_noise

    def sub_makeData(self, n, label_noise):
        s, t, u, v = np.random.randn(n), np.random.randn(n), np.random.randn(n), np.random.randn(n)
        norm = (s**2 + t**2 + u**2 + v**2)**(0.5)
        x = 2*np.c_[u/norm, v/norm]
        w = 1.5*np.eye(2)
        y = np.sign(x.dot(w[:, 0]) + np.sin(x.dot(w[:, 1]))).astype(np.int32).reshape(n)
        y_clean = deepcopy(y)
        if label_noise > 0:
            idx = np.random.permutation(n)[:int(n*label_noise)]
            y[idx] *= -1
        y, y_clean = (y+1)//2, (y_clean+1)//2
        r_dummy = np.ones((n, 2))
        return x, r_dummy, y, y_clean

    def makeData(self):
        x_tr, r_tr, y_tr, y_tr_clean = self.sub_makeData(self.n_tr, self.label_noise)
        x_va, r_va, y_va, y_va_clean = self.sub_makeData(self.n_va, self.label_noise)
        x_te, r_te, y_te, y_te_clean = self.sub_makeData(self.n_te, self.label_noise)
        return x_tr.astype('float32'), r_tr.astype('float32'), y_tr.astype('int64'), y_tr_clean.astype('int64'), \
            x_va.astype('float32'), r_va.astype('float32'), y_va.astype('int64'), y_va_clean.astype('int64'), \
            x_te.astype('float32'), r_te.astype('float32'), y_te.astype('int64'), y_te_clean.astype('int64')


class MyDataset(torch.utils.data.Dataset):
    def __init__(self, data, label, conf):
        self.data = torch.from_numpy(data)
        self.conf = conf
        self.data_num = len(data)
        self.label = label

    def __len__(self):
        return self.data_num

    def __getitem__(self, idx):
        return self.data[idx], self.label[idx], self.conf[idx]


class mlp_model(nn.Module):
    def __init__(self, input_dim, output_dim, middle_dim=500):
        super(mlp_model, self).__init__()
        self.fc1 = nn.Linear(input_dim, middle_dim)
        self.bn1 = nn.BatchNorm1d(middle_dim)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(middle_dim, middle_dim)
        self.bn2 = nn.BatchNorm1d(middle_dim)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(middle_dim, middle_dim)
        self.bn3 = nn.BatchNorm1d(middle_dim)
        self.relu3 = nn.ReLU()
        self.fc4 = nn.Linear(middle_dim, middle_dim)
        self.bn4 = nn.BatchNorm1d(middle_dim)
        self.relu4 = nn.ReLU()
        self.fc5 = nn.Linear(middle_dim, output_dim)

    def forward(self, x):
        out = x
        out = self.relu1(self.bn1(self.fc1(out)))
        out = self.relu2(self.bn2(self.fc2(out)))
        out = self.relu3(self.bn3(self.fc3(out)))
        out = self.relu4(self.bn4(self.fc4(out)))
        out = self.fc5(out)
        return out


def acc_check(loader, model):
    total_acc, total_loss, num_samples = 0, 0, 0
    criterion = nn.CrossEntropyLoss(reduction='sum')
    model.eval()
    with torch.no_grad():
        for (images, labels, *empty) in loader:
            outputs = model(images)
            sm_outputs = F.softmax(outputs, dim=1)
            _, predicted = torch.max(sm_outputs.data, 1)
            total_acc += (predicted == labels).sum().item()
            total_loss += criterion(outputs, labels.long())
            num_samples += labels.size(0)
    return 100 * total_acc / num_samples, total_loss / num_samples


def get_args():
    parser = argparse.ArgumentParser(prog='ordinary_demo', usage='Demo with synthetic data.')
    parser.add_argument('-lr', '--learning_rate', default=0.01, type=float)
    parser.add_argument('-bstr', '--batch_size_tr', default=200, type=int)
    parser.add_argument('-bste', '--batch_size_te', default=1000, type=int)
    parser.add_argument('-ts', '--training_samples', default=500, type=int)
    parser.add_argument('-vs', '--validation_samples', default=500, type=int)
    parser.add_argument('-ln', '--label_noise', default=0.1, type=float)
    parser.add_argument('-md', '--middle_dim', type=int, default=256)
    parser.add_argument('-e', '--epochs', type=int, default=100)
    parser.add_argument('-wd', '--weight_decay', type=float, default=0)
    parser.add_argument('-mm', '--momentum', type=float, default=0.9)
    parser.add_argument('-opt', '--optimizer', type=str, default='sgd')
    parser.add_argument('-fl', '--flood_level', type=float, default=0.27)
    parser.add_argument('-rs', '--random_seed', default=0, type=int)
    return parser.parse_args()


def main(args):
    np.random.seed(args.random_seed)
    torch.manual_seed(args.random_seed)
    K = 2

    dataset = Sinusoid2dimDataNumpy(label_noise=args.label_noise, n_tr=args.training_samples,
                                    n_va=args.validation_samples, n_te=2000)
    x_tr, r_tr, y_tr, y_tr_cl, x_va, r_va, y_va, y_va_cl, x_te, r_te, y_te, y_te_cl = dataset.makeData()
    train_loader = torch.utils.data.DataLoader(MyDataset(x_tr, y_tr, r_tr), batch_size=args.batch_size_tr, shuffle=True)
    vali_loader = torch.utils.data.DataLoader(MyDataset(x_va, y_va, r_va), batch_size=args.batch_size_te)
    test_cl_loader = torch.utils.data.DataLoader(MyDataset(x_te, y_te_cl, r_te), batch_size=args.batch_size_te)

    model = mlp_model(input_dim=2, output_dim=K, middle_dim=args.middle_dim)
    if args.optimizer == 'sgd':
        optimizer = torch.optim.SGD(model.parameters(), weight_decay=args.weight_decay,
                                    lr=args.learning_rate, momentum=args.momentum)
    elif args.optimizer == 'adam':
        optimizer = torch.optim.Adam(model.parameters(), weight_decay=args.weight_decay, lr=args.learning_rate)
    else:
        raise RuntimeError("Optimizer name is invalid.")
    ce_mean = nn.CrossEntropyLoss(reduction='mean')

    flooded_count, mini_batch_count = 0, 0
    for epoch in range(-1, args.epochs):
        model.train()
        if epoch != -1:  # skip epoch 0 for training
            for (images, labels, _) in train_loader:
                outputs = model(images)
                loss_mean = ce_mean(outputs, labels)
                if args.flood_level > 0:
                    loss_corrected = (loss_mean - args.flood_level).abs() + args.flood_level
                else:
                    loss_corrected = loss_mean

                if loss_corrected != loss_mean:
                    flooded_count += 1
                mini_batch_count += 1
                optimizer.zero_grad()
                loss_corrected.backward()
                optimizer.step()

        if (epoch + 1) % 10 == 0:
            tr_acc, tr_loss = acc_check(train_loader, model)
            va_acc, va_loss = acc_check(vali_loader, model)
            te_cl_acc, te_cl_loss = acc_check(test_cl_loader, model)
            proportion = float(flooded_count) / mini_batch_count if mini_batch_count != 0 else 0
            print('Epoch: {} TrLss: {:.4g} VaLss: {:.4g} TrAcc: {:.3g} VaAcc: {:.3g} TeClAcc: {:.3g} TeClLss: {:.4g} Flood prop: {:.3g}'.format(
                epoch + 1, tr_loss, va_loss, tr_acc, va_acc, te_cl_acc, te_cl_loss, proportion))
            flooded_count, mini_batch_count = 0, 0


if __name__ == "__main__":
    args = get_args()
    main(args)
