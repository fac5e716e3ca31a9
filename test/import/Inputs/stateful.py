"""Models that mutate their buffers in forward (lit inputs for buffer-mutation.mlir)."""

import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 8)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return self.l(x) * self.count


class BN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 8)
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.l(x)))


def counter():
    torch.manual_seed(0)
    return Counter().eval(), (torch.randn(4, 8),)


def bn_train():
    torch.manual_seed(0)
    return BN().train(), (torch.randn(4, 8),)
