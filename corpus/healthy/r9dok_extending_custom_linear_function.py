"""Three-arm spiral classifier built from the custom autograd Functions of the PyTorch
"Extending PyTorch" notes: LinearFunction (forward input.mm(weight.t()) + bias, hand-written
backward using ctx.needs_input_grad) wrapped in an nn.Module `Linear` with its own Parameters,
and MulConstant (a non-tensor argument whose gradient is None). The Functions are checked with
torch.autograd.gradcheck in double precision before training with SGD + momentum.
"""
import argparse
import math

import torch
import torch.nn as nn
from torch.autograd import Function, gradcheck
from torch.utils.data import DataLoader, TensorDataset


# Inherit from Function
class LinearFunction(Function):

    # Note that forward, setup_context, and backward are @staticmethods
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    # inputs is a Tuple of all of the inputs passed to forward.
    # output is the output of the forward().
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    # This function has only a single output, so it gets only one gradient
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None

        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)

        return grad_input, grad_weight, grad_bias


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        # ctx is a context object that can be used to stash information
        # for backward computation
        tensor, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        # We return as many input gradients as there were arguments.
        # Gradients of non-Tensor arguments to forward must be None.
        return grad_output * ctx.constant, None


class Linear(nn.Module):
    def __init__(self, input_features, output_features, bias=True):
        super().__init__()
        self.input_features = input_features
        self.output_features = output_features

        # nn.Parameter is a special kind of Tensor, that will get
        # automatically registered as Module's parameter once it's assigned
        # as an attribute. Parameters and buffers need to be registered, or
        # they won't appear in .parameters() (doesn't apply to buffers), and
        # won't be converted when e.g. .cuda() is called. You can use
        # .register_buffer() to register buffers.
        # nn.Parameters require gradients by default.
        self.weight = nn.Parameter(torch.empty(output_features, input_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(output_features))
        else:
            # You should always register all possible parameters, but the
            # optional ones can be None if you want.
            self.register_parameter("bias", None)

        # Not a very smart way to initialize weights
        nn.init.uniform_(self.weight, -0.1, 0.1)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -0.1, 0.1)

    def forward(self, input):
        # See the autograd section for explanation of what happens here.
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self):
        # (Optional)Set the extra information about this module. You can test
        # it by printing an object of this class.
        return "input_features={}, output_features={}, bias={}".format(
            self.input_features, self.output_features, self.bias is not None
        )


class SpiralNet(nn.Module):
    def __init__(self, hidden=64, num_classes=3, logit_scale=0.5):
        super().__init__()
        self.fc1 = Linear(2, hidden)
        self.fc2 = Linear(hidden, hidden)
        self.fc3 = Linear(hidden, num_classes)
        self.logit_scale = logit_scale

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return MulConstant.apply(self.fc3(x), self.logit_scale)


def make_spiral(n_per_class, num_classes=3, noise=0.2, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for c in range(num_classes):
        r = torch.linspace(0.05, 1.0, n_per_class)
        t = c * 2 * math.pi / num_classes + 4.0 * r + noise * torch.randn(n_per_class, generator=g)
        xs.append(torch.stack([r * torch.sin(t), r * torch.cos(t)], dim=1))
        ys.append(torch.full((n_per_class,), c, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


def evaluate(model, loader, criterion):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            total_loss += criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            n += len(y)
    return total_loss / n, correct / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)

    # gradcheck takes a tuple of tensors as input, check if your gradient
    # evaluated with these tensors are close enough to numerical
    # approximations and returns True if they all verify this condition.
    input = (torch.randn(20, 20, dtype=torch.double, requires_grad=True),
             torch.randn(30, 20, dtype=torch.double, requires_grad=True),
             torch.randn(30, dtype=torch.double, requires_grad=True))
    print("gradcheck LinearFunction:", gradcheck(LinearFunction.apply, input, eps=1e-6, atol=1e-4))
    t = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
    print("gradcheck MulConstant:", gradcheck(lambda a: MulConstant.apply(a, 0.5), (t,), eps=1e-6, atol=1e-4))

    x_train, y_train = make_spiral(300, seed=1)
    x_val, y_val = make_spiral(100, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=300)

    model = SpiralNet()
    print(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    val_loss, val_acc = evaluate(model, val_loader, criterion)
    print(f"before training: val loss {val_loss:.4f}  val acc {val_acc:.3f}")
    step = 0
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
        if epoch % 3 == 0 or epoch == args.epochs - 1:
            val_loss, val_acc = evaluate(model, val_loader, criterion)
            print(f"epoch {epoch:2d} step {step:4d}: train loss {running / len(train_loader):.4f}  "
                  f"val loss {val_loss:.4f}  val acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
