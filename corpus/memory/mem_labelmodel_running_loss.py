"""Weak supervision: a generative label model over the votes of labeling functions.

Each example is voted on by 10 labeling functions that either abstain (0) or vote a class
(1..k). The model learns, for every labeling function, how often it fires (propensity) and how
often it is right (class-conditional accuracy) by maximising the marginal likelihood of the
observed votes; its posterior then gives denoised training labels.
"""
import math

import numpy as np
import torch
import torch.nn as nn

np.random.seed(0)
torch.manual_seed(0)


class LearningConfig:
    def __init__(self):
        self.epochs = 2
        self.batch_size = 32
        self.step_size = 0.05
        self.momentum = 0.9


class NaiveBayes(nn.Module):
    """Labeling functions are conditionally independent given the true label."""

    def __init__(self, num_classes, num_lfs, init_acc=0.7, acc_prior=0.025):
        super().__init__()
        init_acc = -1 * math.log(1.0 / init_acc - 1) / 2
        self.accuracy = nn.Parameter(torch.full((num_lfs, num_classes), init_acc))
        self.propensity = nn.Parameter(torch.zeros(num_lfs))
        self.class_balance = nn.Parameter(torch.zeros(num_classes))
        self.num_classes = num_classes
        self.num_lfs = num_lfs
        self.init_acc = init_acc
        self.acc_prior = acc_prior

    def _get_labeling_function_likelihoods(self, votes):
        cll = torch.zeros(votes.shape[0], self.num_classes)

        z_prop = self.propensity.unsqueeze(1)
        z_prop = torch.cat((z_prop, torch.zeros((self.num_lfs, 1))), dim=1)
        z_prop = torch.logsumexp(z_prop, dim=1)

        z_acc = self.accuracy.unsqueeze(2)
        z_acc = torch.cat((z_acc, -1 * self.accuracy.unsqueeze(2)), dim=2)
        z_acc = torch.logsumexp(z_acc, dim=2)

        cll -= torch.sum(z_prop)

        rows, cols = votes.nonzero(as_tuple=True)
        for i, j in zip(rows.tolist(), cols.tolist()):
            v = int(votes[i, j])
            for k in range(self.num_classes):
                if v == (k + 1):
                    logp = self.propensity[j] + self.accuracy[j, k] - z_acc[j, k]
                    cll[i, k] += logp
                else:
                    logp = self.propensity[j] - self.accuracy[j, k] - z_acc[j, k]
                    logp -= math.log(self.num_classes - 1.0)
                    cll[i, k] += logp
        return cll

    def forward(self, votes):
        class_ll = self.class_balance - torch.logsumexp(self.class_balance, dim=0)
        lf_ll = self._get_labeling_function_likelihoods(votes)
        return torch.logsumexp(lf_ll + class_ll, dim=1)

    def _get_regularization_loss(self):
        return self.acc_prior * torch.norm(self.accuracy - self.init_acc)

    def estimate_label_model(self, votes, config):
        batches = [(votes[i:i + config.batch_size],) for i in range(0, votes.shape[0], config.batch_size)]
        optimizer = torch.optim.SGD(self.parameters(), lr=config.step_size, momentum=config.momentum)

        for epoch in range(config.epochs):
            print(f"Epoch {epoch + 1}/{config.epochs}")
            self.train()
            running_loss = 0.0
            for i_batch, inputs in enumerate(batches):
                optimizer.zero_grad()
                log_likelihood = self(*inputs)
                loss = -1 * torch.mean(log_likelihood)
                loss += self._get_regularization_loss()
                loss.backward()
                optimizer.step()
                running_loss += loss
                if i_batch % 10 == 0:
                    print(f"  batch {i_batch:3d}  nll {loss.item():.4f}")
            epoch_loss = running_loss / len(batches)
            print("Train Loss: %.6f" % epoch_loss)

    @torch.no_grad()
    def get_label_distribution(self, votes):
        class_ll = self.class_balance - torch.logsumexp(self.class_balance, dim=0)
        joint = self._get_labeling_function_likelihoods(votes) + class_ll
        return torch.softmax(joint, dim=1)

    def get_accuracies(self):
        acc = self.accuracy.detach()
        return torch.sigmoid(2 * acc)


def simulate_votes(n, num_lfs, num_classes):
    labels = np.random.randint(0, num_classes, size=n)
    true_acc = np.random.uniform(0.55, 0.95, size=num_lfs)
    propensity = np.random.uniform(0.3, 0.7, size=num_lfs)
    votes = np.zeros((n, num_lfs), dtype=np.int64)
    for j in range(num_lfs):
        fires = np.random.rand(n) < propensity[j]
        correct = np.random.rand(n) < true_acc[j]
        wrong = (labels + np.random.randint(1, num_classes, size=n)) % num_classes
        votes[fires, j] = np.where(correct, labels, wrong)[fires] + 1
    return torch.from_numpy(votes), labels, true_acc


if __name__ == "__main__":
    num_classes, num_lfs = 2, 10
    votes, labels, true_acc = simulate_votes(1152, num_lfs, num_classes)
    print(f"{votes.shape[0]} examples, {num_lfs} labeling functions, "
          f"coverage {(votes > 0).float().mean().item():.2f}")

    model = NaiveBayes(num_classes, num_lfs)
    model.estimate_label_model(votes, LearningConfig())

    posterior = model.get_label_distribution(votes[:400])
    pred = posterior.argmax(1).numpy()
    print(f"label model accuracy on 400 examples: {(pred == labels[:400]).mean():.3f}")
    est = model.get_accuracies()[:, 0].numpy()
    print("estimated LF accuracies:", np.round(est, 2))
    print("true LF accuracies:     ", np.round(true_acc, 2))
