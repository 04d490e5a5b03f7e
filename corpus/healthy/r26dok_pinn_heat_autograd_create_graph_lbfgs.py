"""Physics-informed neural network (Raissi et al.), written like jayroxis/PINNs 'Burgers Inference
(PyTorch)': a tanh MLP u(x, t) is fitted to initial/boundary points only, plus the PDE residual
f = u_t - nu * u_xx at random collocation points, with the derivatives taken by
torch.autograd.grad(..., create_graph=True) on inputs that require grad. Adam first, then L-BFGS
(strong Wolfe) driven by a closure. The PDE is the 1-D heat equation on [-1, 1] x [0, 1] with
u(x, 0) = sin(pi x) and u(+-1, t) = 0, so the exact solution exp(-nu pi^2 t) sin(pi x) is known."""
import math
from collections import OrderedDict
import numpy as np
import torch

torch.manual_seed(1234)
np.random.seed(1234)
device = torch.device('cpu')

nu = 0.1
N_u = 100
N_f = 1000
layers = [2, 20, 20, 20, 20, 1]


class DNN(torch.nn.Module):
    def __init__(self, layers):
        super(DNN, self).__init__()
        self.depth = len(layers) - 1
        self.activation = torch.nn.Tanh
        layer_list = list()
        for i in range(self.depth - 1):
            layer_list.append(('layer_%d' % i, torch.nn.Linear(layers[i], layers[i + 1])))
            layer_list.append(('activation_%d' % i, self.activation()))
        layer_list.append(('layer_%d' % (self.depth - 1), torch.nn.Linear(layers[-2], layers[-1])))
        self.layers = torch.nn.Sequential(OrderedDict(layer_list))

    def forward(self, x):
        return self.layers(x)


class PhysicsInformedNN():
    def __init__(self, X_u, u, X_f, layers, lb, ub, nu):
        self.lb = torch.tensor(lb).float().to(device)
        self.ub = torch.tensor(ub).float().to(device)
        self.x_u = torch.tensor(X_u[:, 0:1], requires_grad=True).float().to(device)
        self.t_u = torch.tensor(X_u[:, 1:2], requires_grad=True).float().to(device)
        self.x_f = torch.tensor(X_f[:, 0:1], requires_grad=True).float().to(device)
        self.t_f = torch.tensor(X_f[:, 1:2], requires_grad=True).float().to(device)
        self.u = torch.tensor(u).float().to(device)
        self.nu = nu
        self.dnn = DNN(layers).to(device)
        self.optimizer_adam = torch.optim.Adam(self.dnn.parameters(), lr=1e-3)
        self.optimizer = torch.optim.LBFGS(
            self.dnn.parameters(),
            lr=1.0,
            max_iter=250,
            max_eval=300,
            history_size=50,
            tolerance_grad=1e-7,
            tolerance_change=1.0 * np.finfo(float).eps,
            line_search_fn="strong_wolfe"
        )
        self.iter = 0

    def net_u(self, x, t):
        X = torch.cat([x, t], dim=1)
        H = 2.0 * (X - self.lb) / (self.ub - self.lb) - 1.0
        u = self.dnn(H)
        return u

    def net_f(self, x, t):
        u = self.net_u(x, t)
        u_t = torch.autograd.grad(u, t, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_x = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x, grad_outputs=torch.ones_like(u_x), retain_graph=True,
                                   create_graph=True)[0]
        f = u_t - self.nu * u_xx
        return f

    def loss_func(self):
        self.optimizer.zero_grad()
        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(self.x_f, self.t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred ** 2)
        loss = loss_u + loss_f
        loss.backward()
        self.iter += 1
        if self.iter % 50 == 0:
            print('LBFGS Iter %d, Loss: %.5e, Loss_u: %.5e, Loss_f: %.5e' %
                  (self.iter, loss.item(), loss_u.item(), loss_f.item()))
        return loss

    def train(self, nIter):
        self.dnn.train()
        for epoch in range(nIter):
            u_pred = self.net_u(self.x_u, self.t_u)
            f_pred = self.net_f(self.x_f, self.t_f)
            loss = torch.mean((self.u - u_pred) ** 2) + torch.mean(f_pred ** 2)

            self.optimizer_adam.zero_grad()
            loss.backward()
            self.optimizer_adam.step()

            if epoch % 100 == 0:
                print('Adam It: %d, Loss: %.3e' % (epoch, loss.item()))

        self.optimizer.step(self.loss_func)

    def predict(self, X):
        x = torch.tensor(X[:, 0:1], requires_grad=True).float().to(device)
        t = torch.tensor(X[:, 1:2], requires_grad=True).float().to(device)
        self.dnn.eval()
        u = self.net_u(x, t)
        f = self.net_f(x, t)
        return u.detach().cpu().numpy(), f.detach().cpu().numpy()


def exact(x, t):
    return np.exp(-nu * math.pi ** 2 * t) * np.sin(math.pi * x)


lb = np.array([-1.0, 0.0])
ub = np.array([1.0, 1.0])

x0 = np.random.uniform(-1, 1, (N_u // 2, 1))
X_u_ic = np.hstack([x0, np.zeros_like(x0)])
tb = np.random.uniform(0, 1, (N_u // 2, 1))
X_u_bc = np.hstack([np.where(np.arange(N_u // 2)[:, None] % 2 == 0, -1.0, 1.0), tb])
X_u_train = np.vstack([X_u_ic, X_u_bc])
u_train = exact(X_u_train[:, 0:1], X_u_train[:, 1:2])
X_f_train = lb + (ub - lb) * np.random.rand(N_f, 2)
X_f_train = np.vstack((X_f_train, X_u_train))

xs, ts = np.meshgrid(np.linspace(-1, 1, 101), np.linspace(0, 1, 51))
X_star = np.hstack([xs.reshape(-1, 1), ts.reshape(-1, 1)])
u_star = exact(X_star[:, 0:1], X_star[:, 1:2])

model = PhysicsInformedNN(X_u_train, u_train, X_f_train, layers, lb, ub, nu)
u_pred, _ = model.predict(X_star)
print('Initial relative L2 error: %.3e' % (np.linalg.norm(u_star - u_pred, 2) / np.linalg.norm(u_star, 2)))

model.train(400)

u_pred, f_pred = model.predict(X_star)
error_u = np.linalg.norm(u_star - u_pred, 2) / np.linalg.norm(u_star, 2)
print('Final relative L2 error u: %.3e, mean |f|: %.3e' % (error_u, np.abs(f_pred).mean()))
