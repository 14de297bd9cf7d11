"""``theodolite.nn.Linear``: ``torch.nn.Linear`` running the bundled kernels; ``patch``/``unpatch`` a model in place.

``Linear`` subclasses ``torch.nn.Linear`` and changes only ``forward``: same parameters, state_dict, init, repr
fields and ``isinstance`` answer.  ``patch`` therefore swaps a module's class in place (no new module, no copied
parameter: optimizer state, hooks and parameter sharing stay as they were), and ``unpatch`` swaps it back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from theodolite import ops

NameFilter = str | re.Pattern[str] | Callable[[str], bool] | None


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` whose forward runs ``theodolite.ops.linear`` (the model's pick of the bundled kernels).

    Under autocast the inputs are cast as ``F.linear`` would be; a dtype or device the kernels do not run falls back
    to torch's kernel with one ``theodolite.errors.FallbackWarning``."""

    def forward(self, input: Tensor) -> Tensor:
        weight: Tensor = self.weight
        bias: Tensor | None = self.bias
        device = input.device.type
        if device in ("cuda", "cpu") and torch.is_autocast_enabled(device):  # cast as F.linear would be
            dtype = torch.get_autocast_dtype(device)
            input, weight = input.to(dtype), weight.to(dtype)
            bias = bias.to(dtype) if bias is not None else None
        return ops.linear(input, weight, bias)

    @classmethod
    def from_linear(cls, module: torch.nn.Linear) -> Linear:
        """A theodolite Linear sharing ``module``'s parameters (no copy; ``module`` itself is left unchanged)."""
        if not isinstance(module, torch.nn.Linear):
            raise TypeError(f"from_linear needs a torch.nn.Linear, got {type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = module.in_features, module.out_features
        new.weight = module.weight
        new.bias = module.bias
        new.train(module.training)
        return new


def _name_matches(name: str, names: NameFilter) -> bool:
    if names is None:
        return True
    if isinstance(names, str):
        return re.search(names, name) is not None
    if isinstance(names, re.Pattern):
        return names.search(name) is not None
    return bool(names(name))


def _selected(
    model: torch.nn.Module, cls: type[torch.nn.Module], names: NameFilter, dtypes: Iterable[torch.dtype] | None
) -> list[tuple[str, torch.nn.Module]]:
    allowed = None if dtypes is None else frozenset(dtypes)
    return [
        (name, module)
        for name, module in model.named_modules()
        if type(module) is cls and _name_matches(name, names) and (allowed is None or module.weight.dtype in allowed)  # type: ignore[union-attr]
    ]


def patch(model: torch.nn.Module, names: NameFilter = None, dtypes: Iterable[torch.dtype] | None = None) -> list[str]:
    """Make the model's ``torch.nn.Linear`` modules (exactly that class, not subclasses such as attention's
    out-projection, which torch calls by its weight) run theodolite's kernels, in place.

    ``names``: a regular expression searched in each module's qualified name, or a predicate on it; ``dtypes``: only
    modules whose weight has one of these dtypes.  Returns the names of the modules patched (the model itself is
    ``""``)."""
    chosen = _selected(model, torch.nn.Linear, names, dtypes)
    for _, module in chosen:
        module.__class__ = Linear
    return [name for name, _ in chosen]


def unpatch(model: torch.nn.Module, names: NameFilter = None) -> list[str]:
    """Turn ``patch``'s (or any ``theodolite.nn.Linear``) modules back into ``torch.nn.Linear`` in place; returns
    their names."""
    chosen = _selected(model, Linear, names, None)
    for _, module in chosen:
        module.__class__ = torch.nn.Linear
    return [name for name, _ in chosen]


__all__ = ["Linear", "patch", "unpatch"]
