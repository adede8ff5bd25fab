"""A suite model given as a PyTorch callable: ``[models.NAME] torch = "package.module:callable"``.

The callable takes no arguments and returns ``(module, example_inputs)``: a ``torch.nn.Module`` and
a tuple of tensors that ``module(*example_inputs)`` takes (one tensor alone counts as a tuple of
one). Why a tuple and not a dict of named tensors: ``torch.compile`` calls a module positionally the
way its user's code does, and the names come from ``forward``'s parameters (``input0``... where it
takes ``*args``). Its module is imported from the suite's ``[compiler] path`` first, then
``sys.path``, as user passes are. Torch is seeded (``torch.manual_seed(WEIGHT_SEED)``) before each
call, so every process that builds the model gets the same weights.

Materializing such a model (:func:`describe`) imports and calls the callable in a child process
(this process's ``sys.modules`` stays clean for checkouts of other refs, as the user-pass check keeps
it, and a user model that crashes costs one line, not the run) and writes a descriptor,
``NAME.torch.json``: the callable, the ``sys.path`` root its module came from, the sha256 of the
module file, the torch version and the inputs. That file is the model path a compile gets; the
backend that compiles it (``Capabilities.torch_models``) builds the module again from the recorded
root and refuses it when the module's source changed since.

What the model's record holds (``LoadedModel``):

``sha256``      the identity: the callable's name, its module file's sha256, the torch version (the
                seeded weights are torch's random numbers), the weight seed, and each input's name,
                dtype and shape, so it changes when the model's source does
``inputs``      one spec per example input, same dtype and shape; perfguard feeds seeded random
                values as for every model (floats standard normal), integers within the example's
                own ``[min, max + 1)`` (token ids stay below the vocabulary the example used)
``node_count``  the FX graph's operations (``torch.fx.symbolic_trace``: calls of modules, functions
                and methods); a module that does not trace symbolically (control flow on values)
                counts its leaf modules instead
``opset``       0: there is no ONNX opset
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from perfguard import children
from perfguard.errors import UserError, did_you_mean, first_line
from perfguard.models.inputs import InputSpec
from perfguard.names import safe_filename
from perfguard.suite import ModelSpec

if TYPE_CHECKING:
    import torch

#: The descriptor's file name ends so: a compile's ``model_path`` that is a PyTorch callable.
SUFFIX = ".torch.json"
#: Descriptor format history: 1 (2026-12-06), the first.
VERSION = 1
#: ``torch.manual_seed`` before every call of the callable: the model's weights.
WEIGHT_SEED = 0
#: Seconds the child may take to import torch and the module and call the callable once.
DESCRIBE_TIMEOUT_S = 300.0
#: Example input dtypes perfguard can feed (numpy has no bfloat16).
DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
RETURNS = "it must return (module, example_inputs): a torch.nn.Module and a tuple of tensors"


@dataclass(frozen=True)
class TorchModel:
    """The descriptor of a PyTorch-callable model (``NAME.torch.json``)."""

    callable: str
    root: str
    source_sha256: str
    torch: str
    inputs: tuple[InputSpec, ...]
    node_count: int
    seed: int = WEIGHT_SEED

    @property
    def sha256(self) -> str:
        """The model's identity: what decides the module and what it is fed (not the root: the same
        source in another checkout is the same model)."""
        part = {"callable": self.callable, "source_sha256": self.source_sha256, "torch": self.torch,
                "seed": self.seed, "inputs": [[s.name, s.dtype, list(s.shape)] for s in self.inputs]}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, object]:
        return {"version": VERSION, "callable": self.callable, "root": self.root, "source_sha256": self.source_sha256,
                "torch": self.torch, "inputs": [s.to_json() for s in self.inputs], "node_count": self.node_count,
                "seed": self.seed}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> TorchModel:
        inputs = data["inputs"]
        if not isinstance(inputs, list) or not all(isinstance(s, dict) for s in inputs):
            raise ValueError(f"'inputs' must be a list of input specs, found {inputs!r}")
        return cls(str(data["callable"]), str(data["root"]), str(data["source_sha256"]), str(data["torch"]),
                   tuple(InputSpec.from_json(s) for s in inputs), _integer(data, "node_count"), _integer(data, "seed"))

    @classmethod
    def read(cls, path: Path) -> TorchModel:
        """The descriptor at ``path``; ``UserError`` for one this perfguard did not write."""
        from perfguard.jsonparse import parse_json

        try:
            data = parse_json(path.read_text(), path)  # nested 100,000 deep: a one-line StorageError
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if int(data["version"]) > VERSION:
                raise UserError(f"{path}: descriptor version {data['version']} is newer than this perfguard's "
                                f"{VERSION}; upgrade perfguard")
            return cls.from_json(data)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: not a perfguard torch model descriptor ({first_line(exc)})") from None


def _integer(data: Mapping[str, object], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key!r} must be an integer, found {value!r}")
    return value


def is_torch_model(path: Path) -> bool:
    """Whether ``path`` is a PyTorch-callable model's descriptor (not an ONNX file)."""
    return path.name.endswith(SUFFIX)


# -- in the parent: the descriptor, from a child ----------------------------------------------------


def describe(spec: ModelSpec, folder: Path, compiler_path: Path | None) -> tuple[Path, TorchModel]:
    """Import and call ``spec.torch`` in a child process with ``compiler_path`` first on
    ``sys.path``; write its descriptor to ``folder``. ``UserError``, one line naming the model and
    what to fix, when it does not import, is no callable, raises or returns the wrong thing."""
    where = f"model {spec.name!r} (torch = {spec.torch!r})"
    with tempfile.TemporaryDirectory(prefix="perfguard-torch-model-") as tmp:
        response = Path(tmp) / "response.json"
        args = [sys.executable, "-m", "perfguard.models.torch_callable", str(spec.torch),
                str(compiler_path or ""), str(response)]
        try:
            proc = children.run(args, timeout=DESCRIBE_TIMEOUT_S, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError(f"{where}: building it took over {DESCRIBE_TIMEOUT_S:g} s; does its module hang "
                            "on import or its callable never return?") from None
        try:
            found = json.loads(response.read_text())
        except (OSError, ValueError):
            lines = [line for line in (proc.stderr or "").splitlines() if line.strip()]
            tail = lines[-1][:200] if lines else f"exit code {proc.returncode}"
            raise UserError(f"{where}: building it crashed the process that called it: {tail}") from None
    if "error" in found:
        raise UserError(f"{where}: {found['error']}")
    model = TorchModel.from_json(found)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe_filename(spec.name)}{SUFFIX}"
    path.write_text(json.dumps(model.to_json(), indent=1, sort_keys=True))
    return path, model


# -- in the child and in the compiling backend: the module ------------------------------------------


@dataclass(frozen=True)
class BuiltModel:
    """What the callable returned, checked: the eval-mode module, its example inputs and their
    names, and where its Python module came from."""

    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    names: tuple[str, ...]
    source_sha256: str
    root: str


def build(name: str, search: str = "") -> BuiltModel:
    """Seed torch, import ``package.module:callable`` as ``sys.path`` has it, call it and check
    what it returned; ``UserError`` (one line) otherwise. ``search``: the folder named in a
    message about a module that does not import."""
    import torch

    module_name, _, function_name = name.partition(":")
    python_module = _imported(module_name, search)
    function = getattr(python_module, function_name, None)
    if not callable(function):
        own = [k for k, v in vars(python_module).items() if callable(v) and not k.startswith("_")]
        if function is None:
            raise UserError(f"module {module_name} has no callable {function_name!r}"
                            f"{did_you_mean(function_name, own)}; {RETURNS}")
        raise UserError(f"{module_name}.{function_name} is {_kind(function)}, not a callable; {RETURNS}")
    torch.manual_seed(WEIGHT_SEED)
    try:
        returned = function()
    except Exception as exc:
        raise UserError(f"calling {name} raised {type(exc).__name__}: {first_line(exc)}") from None
    module, inputs = _checked(returned, name)
    module.eval()
    with torch.no_grad():
        try:
            outputs = module(*inputs)
        except Exception as exc:
            raise UserError(f"the module {name} returned does not run on its example inputs: "
                            f"{type(exc).__name__}: {first_line(exc)}") from None
    _check_outputs(outputs, name)
    return BuiltModel(module, inputs, _input_names(module, len(inputs)), source_sha256(python_module),
                      module_root(module_name, python_module))


def _imported(module_name: str, search: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = f"the [compiler] path {search}" if search else "sys.path (the suite sets no [compiler] path)"
        if exc.name == module_name.split(".")[0]:
            found = [m.name for m in pkgutil.iter_modules([search] if search else None)]
            raise UserError(f"no module {exc.name!r} in {where}{did_you_mean(exc.name, found)}; put the model's "
                            "module there or fix the name") from None
        raise UserError(f"module {module_name} does not import: ModuleNotFoundError: {first_line(exc)}") from None
    except Exception as exc:
        raise UserError(f"module {module_name} does not import: {type(exc).__name__}: {first_line(exc)}") from None


def _checked(returned: object, name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import torch

    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise UserError(f"{name} returned {_kind(returned)}; {RETURNS}")
    module, inputs = returned
    if not isinstance(module, torch.nn.Module):
        raise UserError(f"{name} returned {_kind(module)} as its module; {RETURNS}")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if isinstance(inputs, Mapping):
        raise UserError(f"{name} returned its example inputs as a dict; return a tuple of tensors in the order "
                        "forward takes them")
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise UserError(f"{name} returned {_kind(inputs)} as its example inputs; {RETURNS}")
    for index, tensor in enumerate(inputs):
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise UserError(f"{name}: example input {index} is {dtype}; perfguard feeds {', '.join(DTYPES)}")
    return module, tuple(inputs)


def _check_outputs(outputs: object, name: str) -> None:
    import torch

    tensors = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise UserError(f"the module {name} returned gives {_kind(outputs)}; perfguard compares outputs that are "
                        "a tensor or a tuple of tensors")


def _kind(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _input_names(module: torch.nn.Module, count: int) -> tuple[str, ...]:
    """``forward``'s positional parameter names, or ``input0``... where it has too few."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        parameters = []  # type: ignore[assignment]
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(names[:count]) if len(names) >= count else tuple(f"input{i}" for i in range(count))


def source_sha256(python_module: ModuleType) -> str:
    """The sha256 of the module's file (of its name when it has no file)."""
    file = getattr(python_module, "__file__", None)
    data = Path(file).read_bytes() if file else python_module.__name__.encode()
    return hashlib.sha256(data).hexdigest()


def module_root(module_name: str, python_module: ModuleType | None) -> str:
    """The ``sys.path`` entry ``module_name`` was imported from ("" when it has no file)."""
    file = getattr(python_module, "__file__", None)
    if not file:
        return ""
    path = Path(file).resolve()
    depth = module_name.count(".") + (2 if path.name == "__init__.py" else 1)
    return str(path.parents[depth - 1])


def input_specs(built: BuiltModel) -> tuple[InputSpec, ...]:
    """One spec per example input: its dtype and shape; integers in the example's ``[min, max + 1)``."""
    specs = []
    for name, tensor in zip(built.names, built.inputs, strict=True):
        dtype, shape = str(tensor.dtype).removeprefix("torch."), tuple(int(d) for d in tensor.shape)
        if tensor.is_floating_point():
            specs.append(InputSpec(name, dtype, shape))
        elif dtype == "bool" or tensor.numel() == 0:
            specs.append(InputSpec(name, dtype, shape, 0, 2, "integers"))
        else:
            specs.append(InputSpec(name, dtype, shape, int(tensor.min()), int(tensor.max()) + 1, "integers"))
    return tuple(specs)


def node_count(module: torch.nn.Module) -> int:
    """The operations of the module's FX graph, or its leaf modules where it does not trace symbolically."""
    import torch

    try:
        graph = torch.fx.symbolic_trace(module).graph
    except Exception:
        return sum(1 for m in module.modules() if not list(m.children()))
    return sum(1 for n in graph.nodes if n.op in ("call_module", "call_function", "call_method"))


def _describe_here(name: str, search: str) -> dict[str, object]:
    import torch

    if search:
        sys.path.insert(0, search)
    built = build(name, search)
    model = TorchModel(name, built.root, built.source_sha256, str(torch.__version__), input_specs(built),
                       node_count(built.module))
    return model.to_json()


def main(argv: list[str]) -> int:
    """The child: ``python -m perfguard.models.torch_callable CALLABLE SEARCH_PATH RESPONSE.json``."""
    name, search, response = argv
    try:
        found = _describe_here(name, search)
    except UserError as exc:
        found = {"error": str(exc)}
    except ImportError as exc:  # torch itself
        found = {"error": f"a torch model needs PyTorch ({first_line(exc)}); pip install 'perfguard[torch]'"}
    Path(response).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
