"""A user's own PyTorch model for the ``inductor`` backend: ``[models.NAME] torch =
"inductor_models.small_cnn:small_cnn"`` (``suites/inductor-user-model.toml``).

A model callable takes no arguments and returns ``(module, example_inputs)``: a ``torch.nn.Module``
and a tuple of tensors that ``module(*example_inputs)`` takes. perfguard seeds torch before calling
it (the weights are reproducible) and feeds seeded random inputs of the examples' dtypes and shapes.
"""

from __future__ import annotations

import torch


class SmallCnn(torch.nn.Module):
    """Two convolutions with batch norm and ReLU, global average pooling and a linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(32, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(images)))
        y = torch.relu(self.conv2(y))
        return self.head(torch.flatten(torch.mean(y, dim=(2, 3)), 1))


def small_cnn() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return SmallCnn(), (torch.randn(1, 3, 32, 32),)
