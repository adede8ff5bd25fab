"""Reading, writing, checking and hashing ONNX model files, external data included.

A model over 2 GB cannot be one protobuf: its tensors live in side files (``model.onnx`` +
``model.onnx.data``, locations relative to the model's folder). Every place perfguard reads or writes
a model goes through here so that

* the data files are found, read and written next to the model (``onnx.save`` APPENDS to an
  existing data file, so a stale one is removed first);
* an artifact compiled from an external-data model keeps its data in a side file (an inline copy of
  a >2 GB model cannot be written at all);
* hashes and sizes of a model or artifact cover its data files, since they are part of what computes;
* ``onnx.checker`` gets a path (not a >2 GB in-memory proto, which it refuses).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, MutableSequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

# protobuf's hard limit on one serialized message (onnx.checker.MAXIMUM_PROTOBUF).
MAX_PROTOBUF = 2**31 - 1
# Tensors at least this large go to the data file when a model is saved with external data.
EXTERNAL_SIZE_THRESHOLD = 1024


# Messages whose size bound is summed from their parts instead of asked for (see fits_one_protobuf).
_CONTAINERS = ("ModelProto", "GraphProto")
# More than a field's tag and length prefix take (at most 5 + 10 bytes).
_FIELD_OVERHEAD = 16


def _size_bound(message: Any) -> int:
    """An upper bound of ``message``'s serialized size: a model or graph is summed from its fields
    (each message part by its own ``ByteSize``, each string at 4 bytes a character), plus
    ``_FIELD_OVERHEAD`` per field and element for its tag and length."""
    total = 0
    for field, value in message.ListFields():
        items = value if isinstance(value, MutableSequence) else (value,)
        for item in items:
            if field.message_type is None:
                size = len(item) if isinstance(item, bytes) else 4 * len(item) if isinstance(item, str) else 0
            elif item.DESCRIPTOR.name in _CONTAINERS:
                size = _size_bound(item)
            else:
                size = item.ByteSize()
            total += size + _FIELD_OVERHEAD
    return total


def fits_one_protobuf(message: Any) -> bool:
    """Whether ``message`` (a model or graph) serializes to at most ``MAX_PROTOBUF`` bytes.

    Asking a whole model for its ``ByteSize()`` encodes it: 0.18-0.21 s for an 87 MB ResNet-34 in
    protobuf 7 (upb), while the ``ByteSize()`` of each of its tensors summed takes 0.02-0.05 s. A
    compile asked up to four times (the graph hash before and after, the save, the checker) and each
    compile-time repeat once more. So the bound of :func:`_size_bound` decides, and only a model
    within its overhead of the limit is asked for its exact size."""
    return _size_bound(message) <= MAX_PROTOBUF or int(message.ByteSize()) <= MAX_PROTOBUF


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a graph: initializers, sparse initializers, attributes, nested graphs."""
    import onnx

    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from _tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from _tensors(body)


def external_locations(model: onnx.ModelProto) -> list[str]:
    """The data-file locations the model's tensors reference, in first-use order (none: [])."""
    import onnx

    locations: list[str] = []
    for tensor in _tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        if location and location not in locations:
            locations.append(location)
    return locations


def load_skeleton(path: Path) -> onnx.ModelProto:
    """The model without its external data (cheap for any size); raises what ``onnx.load`` raises."""
    import onnx

    return onnx.load(str(path), load_external_data=False)


def data_files(path: Path, model: onnx.ModelProto | None = None) -> list[Path]:
    """The external data files of the model at ``path``; ``FileNotFoundError`` names a missing one."""
    skeleton = model if model is not None else load_skeleton(path)
    files = [path.parent / location for location in external_locations(skeleton)]
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"external data file {file.name!r} of {path.name} is missing")
    return files


def load_model(path: Path) -> tuple[onnx.ModelProto, bool]:
    """The model with its data in memory, and whether the file kept that data in side files."""
    from onnx.external_data_helper import load_external_data_for_model

    model = load_skeleton(path)
    external = bool(data_files(path, model))
    if external:
        load_external_data_for_model(model, str(path.parent))
    return model, external


def save_model(model: onnx.ModelProto, path: Path, *, external: bool = False) -> None:
    """Write ``model`` to ``path``; its tensors go to ``<name>.data`` next to it when ``external`` is
    set or the model is too large for one protobuf. Note that saving with external data moves the
    tensor bytes out of ``model`` (onnx does): do not use ``model``'s weights afterwards."""
    import onnx

    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)  # onnx.save appends to an existing data file
    if external or not fits_one_protobuf(model):
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=data.name, size_threshold=EXTERNAL_SIZE_THRESHOLD)
    else:
        onnx.save(model, str(path))


def check_model(model: onnx.ModelProto) -> None:
    """``onnx.checker.check_model`` for a model of any size (a >2 GB one is checked from a file)."""
    import onnx

    if fits_one_protobuf(model):
        onnx.checker.check_model(model)
        return
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    with tempfile.TemporaryDirectory(prefix="perfguard-check-") as tmp:
        target = Path(tmp) / "model.onnx"
        save_model(copy, target, external=True)
        onnx.checker.check_model(str(target))


def model_digest(model: onnx.ModelProto, files: list[Path]) -> str:
    """sha256 of what computes: the proto (deterministic bytes) and, in order, its data files.

    Without data files this is the plain proto hash, so hashes of ordinary models do not change.
    """
    digest = hashlib.sha256(model.SerializeToString(deterministic=True))
    if not files:
        return digest.hexdigest()
    for file in files:
        digest.update(f"\0{file.name}\0{file_sha256(file)}".encode())
    return hashlib.sha256(digest.hexdigest().encode() + b"+external").hexdigest()


def artifact_files(path: Path) -> list[Path]:
    """The files an artifact consists of: the file itself, plus its data files for an ONNX model."""
    if path.suffix != ".onnx":
        return [path]
    try:
        skeleton = load_skeleton(path)
    except Exception:  # a damaged file: its own hash will say so
        return [path]
    return [path, *data_files(path, skeleton)]


def artifact_sha256(path: Path, files: list[Path] | None = None) -> str:
    """The file's sha256; for an ONNX model with external data, a hash over the model and its data
    files (so a damaged data file is caught like a damaged model). ``FileNotFoundError`` for a
    missing data file. ``files``: :func:`artifact_files` of ``path`` when the caller has them (a
    large model is not parsed twice)."""
    files = artifact_files(path) if files is None else files
    if len(files) == 1:
        return file_sha256(path)
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{os.path.relpath(file, path.parent)}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def artifact_size(path: Path) -> int:
    """Bytes on disk of the artifact, data files included."""
    return sum(file.stat().st_size for file in artifact_files(path))


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks (a model or an artifact may not fit twice in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
