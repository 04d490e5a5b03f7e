"""Multi-task regression with homoscedastic uncertainty weighting (Kendall, Gal & Cipolla, 2018),
after Yarin Gal's multi-task-learning-example-pytorch.ipynb, run through an accelerate loop.

Two regression targets share one hidden layer; each task has a learned log variance and the loss
is sum_i exp(-log_var_i) * (y_i - f_i(x))^2 + log_var_i, averaged over the batch. The log
variances are plain tensors handed to the optimizer next to the model's parameters, as in the
notebook. The targets are noisy linear functions of x with noise std 1.0 and 0.2, so the learned
std should approach [1.0, 0.2] and the loss settles below zero.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

Q = 1
D1 = 1  # first output
D2 = 1  # second output


def gen_data(N, rng):
    X = rng.randn(N, Q)
    w1 = 2.
    b1 = 8.
    sigma1 = 1e0  # ground truth
    Y1 = X.dot(np.array([[w1]])) + b1 + sigma1 * rng.randn(N, D1)
    w2 = 3
    b2 = 3.
    sigma2 = 2e-1  # ground truth
    Y2 = X.dot(np.array([[w2]])) + b2 + sigma2 * rng.randn(N, D2)
    return X.astype("float32"), Y1.astype("float32"), Y2.astype("float32")


class Net(nn.Module):
    def __init__(self, input_size, hidden_size, output1_size, output2_size):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden_size, output1_size)
        self.fc3 = nn.Linear(hidden_size, output2_size)

    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out1 = self.fc2(out)
        out2 = self.fc3(out)
        return out1, out2


def criterion(y_pred, y_true, log_vars):
    loss = 0
    for i in range(len(y_pred)):
        precision = torch.exp(-log_vars[i])
        diff = (y_pred[i] - y_true[i]) ** 2.
        loss += torch.sum(precision * diff + log_vars[i], -1)
    return torch.mean(loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_train", type=int, default=4000)
    parser.add_argument("--batch_size", type=int, default=20)
    parser.add_argument("--nb_features", type=int, default=1024)
    parser.add_argument("--num_epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    accelerator = Accelerator(cpu=True)
    set_seed(args.seed)
    rng = np.random.RandomState(args.seed)

    X, Y1, Y2 = gen_data(args.n_train, rng)
    Xv, Y1v, Y2v = gen_data(1000, rng)
    train_dl = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(Y1), torch.from_numpy(Y2)),
                          batch_size=args.batch_size, shuffle=True, drop_last=True)
    eval_dl = DataLoader(TensorDataset(torch.from_numpy(Xv), torch.from_numpy(Y1v), torch.from_numpy(Y2v)),
                         batch_size=500)

    model = Net(Q, args.nb_features, D1, D2)

    # task dependent log variances
    log_var_a = torch.zeros((1,), requires_grad=True)
    log_var_b = torch.zeros((1,), requires_grad=True)
    # Initialized standard deviations (ground truth is 1 and 0.2):
    std_1 = torch.exp(log_var_a) ** 0.5
    std_2 = torch.exp(log_var_b) ** 0.5
    accelerator.print("initial std:", [std_1.item(), std_2.item()])

    # get all parameters (model parameters + task dependent log variances)
    params = ([p for p in model.parameters()] + [log_var_a] + [log_var_b])
    optimizer = torch.optim.Adam(params, lr=args.lr)

    model, optimizer, train_dl, eval_dl = accelerator.prepare(model, optimizer, train_dl, eval_dl)

    step = 0
    for epoch in range(args.num_epochs):
        model.train()
        running = 0.0
        for inp, target1, target2 in train_dl:
            optimizer.zero_grad()
            out = model(inp)
            loss = criterion(out, [target1, target2], [log_var_a, log_var_b])
            accelerator.backward(loss)
            optimizer.step()

            running += loss.item()
            step += 1
            if step % 50 == 0:
                std = [torch.exp(log_var_a).item() ** 0.5, torch.exp(log_var_b).item() ** 0.5]
                accelerator.print(f"epoch {epoch} step {step:4d}  loss {running / 50:8.4f}  "
                                  f"std [{std[0]:.3f}, {std[1]:.3f}]")
                running = 0.0

        model.eval()
        se1 = se2 = n = 0.0
        with torch.no_grad():
            for inp, target1, target2 in eval_dl:
                out1, out2 = model(inp)
                out1, out2, target1, target2 = accelerator.gather_for_metrics((out1, out2, target1, target2))
                se1 += ((out1 - target1) ** 2).sum().item()
                se2 += ((out2 - target2) ** 2).sum().item()
                n += target1.shape[0]
        accelerator.print(f"epoch {epoch}: held-out RMSE task1 {(se1 / n) ** 0.5:.3f} (noise 1.0)  "
                          f"task2 {(se2 / n) ** 0.5:.3f} (noise 0.2)")

    # Found standard deviations (ground truth is 1 and 0.2):
    accelerator.print("learned std:", [torch.exp(log_var_a).item() ** 0.5, torch.exp(log_var_b).item() ** 0.5])


if __name__ == "__main__":
    main()
