"""Model inputs: specs read from the ONNX graph and seeded random feeds (never zeros).

Integer inputs that index an embedding table (Gather from an initializer) get values below the
table's length; integer inputs named like masks get 0/1 values (mostly 1); other integers get small
non-negative values.

Dynamic dimensions are never guessed: a symbolic dimension (``seq``) takes its value from the
suite's ``dims``, an input's full shape from ``inputs.NAME.shape``; a dynamic dimension the suite
does not give is refused with an error naming the input and the dimension (measuring a BERT at
sequence length 1 because nobody said otherwise would be a misleading number). Each spec records
where its shape came from (``shape_from``: ``model`` or ``suite``) and the symbolic values used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from perfguard.errors import UserError, did_you_mean
from perfguard.jsonfields import JsonDict

if TYPE_CHECKING:
    import onnx

    from perfguard.suite import InputSettings


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    low: float = -1.0
    high: float = 1.0
    kind: str = "normal"
    # "model": every axis fixed in the graph; "suite": the suite's dims/shape gave at least one.
    shape_from: str = "model"
    # Symbolic dimension names of this input and the values used for them.
    dims: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> JsonDict:
        data = asdict(self)
        data["shape"] = list(self.shape)
        data["dims"] = dict(self.dims)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InputSpec:
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]), low=data["low"],
                   high=data["high"], kind=data["kind"], shape_from=data.get("shape_from", "model"),
                   dims=dict(data.get("dims") or {}))


def _unknown(kind: str, name: str, valid: list[str]) -> str:
    return f"the model has no {kind} {name!r}{did_you_mean(name, valid, most=1)}; it has: {', '.join(valid) or 'none'}"


def _resolve_shape(value: Any, setting: Any, dims: Mapping[str, int], where: str) -> tuple[tuple[int, ...], bool,
                                                                                          dict[str, int]]:
    """The shape of graph input ``value`` from the graph and the suite's settings.

    Returns the shape, whether the suite decided any axis, and the symbolic names used."""
    name = value.name
    tensor = value.type.tensor_type
    key = f"inputs.{name}"
    given = setting.shape if setting is not None else None
    if not tensor.HasField("shape"):
        if given is None:
            raise UserError(f"{where}: input {name!r} has no shape in the model (unknown rank); give it: "
                            f"{key} = {{ shape = [...] }}")
        return tuple(given), True, {}
    axes = list(tensor.shape.dim)
    if given is not None and len(given) != len(axes):
        raise UserError(f"{where} {key}.shape: the model's input {name!r} has {len(axes)} axes, found "
                        f"{len(given)} ({list(given)})")
    shape: list[int] = []
    symbolic: dict[str, int] = {}
    from_suite = False
    for axis, dim in enumerate(axes):
        fixed = dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else None
        param = dim.dim_param if dim.HasField("dim_param") and dim.dim_param else None
        if fixed is not None:
            if given is not None and given[axis] != fixed:
                raise UserError(f"{where} {key}.shape: axis {axis} of input {name!r} is fixed at {fixed} in the "
                                f"model, found {given[axis]}")
            shape.append(fixed)
            continue
        from_suite = True
        if given is not None:
            if param is not None and param in dims and dims[param] != given[axis]:
                raise UserError(f"{where} {key}.shape: axis {axis} of input {name!r} is the symbolic dim "
                                f"{param!r}, which dims sets to {dims[param]}; found {given[axis]}")
            size = given[axis]
        elif param is not None:
            if param not in dims:
                raise UserError(f"{where}: input {name!r} axis {axis} is the symbolic dim {param!r} and the suite "
                                f"gives no value for it; add dims = {{ {param} = N }} (or {key} = {{ shape = [...] }}) "
                                f"— perfguard does not guess a size")
            size = dims[param]
        else:
            raise UserError(f"{where}: input {name!r} axis {axis} is dynamic with no name in the model; give the "
                            f"input's shape: {key} = {{ shape = [...] }} — perfguard does not guess a size")
        if param is not None:
            symbolic[param] = size
        shape.append(size)
    return tuple(shape), from_suite, symbolic


def _given_range(setting: Any, dtype: np.dtype, name: str, where: str) -> tuple[int, int] | None:
    if setting is None or setting.low is None:
        return None
    key = f"{where} inputs.{name}"
    if np.issubdtype(dtype, np.floating):
        raise UserError(f"{key}: low/high apply to integer inputs; input {name!r} is {dtype.name} "
                        "(floats are standard normal)")
    if dtype == np.bool_:
        lowest, highest = 0, 1
    else:
        info = np.iinfo(dtype)
        lowest, highest = int(info.min), int(info.max)
    if setting.low < lowest or setting.high - 1 > highest:
        raise UserError(f"{key}: [low, high) = [{setting.low}, {setting.high}) does not fit {dtype.name} "
                        f"(values {lowest}..{highest})")
    return int(setting.low), int(setting.high)


def _recorded_ranges(text: str) -> dict[str, tuple[int, int]]:
    """The ``perfguard.input_ranges`` metadata of a model (``{"input_ids": [0, 30522]}``, what the
    zoo records): each input's ``[low, high)`` of integers. A model file is the user's: anything
    else there (not JSON, nested 100,000 deep, ``[1e400, 0]``, a range that holds nothing) is
    ignored, and the heuristics decide as for a model without it."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(found, dict):
        return {}
    ranges = {}
    for name, value in found.items():
        if (isinstance(value, list) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v <= 2**63 for v in value)
                and value[0] < value[1]):
            ranges[name] = (value[0], value[1])
    return ranges


def input_specs(model: onnx.ModelProto, settings: InputSettings | None = None) -> list[InputSpec]:
    """Specs of the graph inputs that are not initializers, shaped by the suite's ``settings``.

    ``UserError`` for a dynamic dimension the settings do not give, and for settings that do not
    fit the model (an input or dim it does not have, a shape of the wrong rank or against a fixed
    axis, a range outside the dtype)."""
    from onnx import helper

    dims = dict(settings.dims) if settings is not None else {}
    given = dict(settings.inputs) if settings is not None else {}
    where = (settings.where if settings is not None else "") or "model"
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    gather_bounds: dict[str, int] = {}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in initializers:
            gather_bounds[node.input[1]] = int(initializers[node.input[0]].dims[0])
    # Zoo models record the valid range of integer inputs; trust it over the heuristics below.
    ranges: dict[str, tuple[int, int]] = {}
    for prop in model.metadata_props:
        if prop.key == "perfguard.input_ranges":
            ranges = _recorded_ranges(prop.value)
    feedable = [value for value in graph.input if value.name not in initializers]
    names = [value.name for value in feedable]
    for name in given:
        if name not in names:
            raise UserError(f"{where} inputs.{name}: " + _unknown("input", name, names))
    declared = sorted({d.dim_param for value in feedable for d in value.type.tensor_type.shape.dim
                       if d.HasField("dim_param") and d.dim_param})
    for name in dims:
        if name not in declared:
            raise UserError(f"{where} dims.{name}: " + _unknown("symbolic dim", name, declared))
    specs = []
    for value in feedable:
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise UserError(f"model input {value.name!r} is not a tensor; perfguard feeds tensors only")
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        setting = given.get(value.name)
        shape, from_suite, symbolic = _resolve_shape(value, setting, dims, where)
        bounds = _given_range(setting, dtype, value.name, where)
        if bounds is not None:
            low, high = bounds
            kind = "mask" if "mask" in value.name.lower() and (low, high) == (0, 2) else "integers"
            specs.append(InputSpec(value.name, dtype.name, shape, low, high, kind))
        elif np.issubdtype(dtype, np.floating):
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
        specs[-1] = replace(specs[-1], shape_from="suite" if from_suite else "model", dims=symbolic)
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
