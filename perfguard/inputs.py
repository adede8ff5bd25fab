"""Model inputs: specs read from the ONNX graph and seeded random feeds (never zeros).

Integer inputs that index an embedding table (Gather from an initializer) get values below the
table's length; integer inputs named like masks get 0/1 values (mostly 1); other integers get small
non-negative values. Dynamic dimensions become 1 and are reported, so a benchmark never runs on a
shape nobody chose silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfguard.errors import UserError

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    low: float = -1.0
    high: float = 1.0
    kind: str = "normal"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InputSpec:
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]), low=data["low"],
                   high=data["high"], kind=data["kind"])


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """Specs of the graph inputs that are not initializers."""
    from onnx import helper

    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    gather_bounds: dict[str, int] = {}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in initializers:
            gather_bounds[node.input[1]] = int(initializers[node.input[0]].dims[0])
    # Zoo models record the valid range of integer inputs; trust it over the heuristics below.
    ranges: dict[str, list[int]] = {}
    for prop in model.metadata_props:
        if prop.key == "perfguard.input_ranges":
            try:
                ranges = json.loads(prop.value)
            except ValueError:
                ranges = {}
    specs = []
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise UserError(f"model input {value.name!r} is not a tensor; perfguard feeds tensors only")
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor.shape.dim)
        if np.issubdtype(dtype, np.floating):
            specs.append(InputSpec(value.name, dtype.name, shape))
        elif dtype == np.bool_:
            specs.append(InputSpec(value.name, dtype.name, shape, 0, 2, "integers"))
        elif np.issubdtype(dtype, np.integer):
            if value.name in ranges:
                low, high = ranges[value.name]
                kind = "mask" if "mask" in value.name.lower() and (low, high) == (0, 2) else "integers"
                specs.append(InputSpec(value.name, dtype.name, shape, low, high, kind))
            elif value.name in gather_bounds:
                specs.append(InputSpec(value.name, dtype.name, shape, 0, gather_bounds[value.name], "integers"))
            elif "mask" in value.name.lower():
                specs.append(InputSpec(value.name, dtype.name, shape, 0, 2, "mask"))
            else:
                specs.append(InputSpec(value.name, dtype.name, shape, 0, 8, "integers"))
        else:
            raise UserError(f"model input {value.name!r} has type {dtype}, which perfguard cannot generate")
    return specs


def make_feeds(specs: list[InputSpec], seed: int) -> dict[str, np.ndarray]:
    """Seeded random inputs for ``specs`` (standard normal floats, bounded integers)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        if spec.kind == "normal":
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(dtype)
        elif spec.kind == "mask":
            # Mostly ones with a zeroed tail, the way padded batches look.
            mask = np.ones(spec.shape, dtype=dtype)
            if spec.shape and spec.shape[-1] > 1:
                cut = int(rng.integers(spec.shape[-1] // 2, spec.shape[-1]))
                mask[..., cut:] = 0
            feeds[spec.name] = mask
        else:
            feeds[spec.name] = rng.integers(int(spec.low), int(spec.high), size=spec.shape).astype(dtype)
    return feeds
