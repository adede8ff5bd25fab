"""Readers of the worker protocol's JSON fields (``perfguard.measure.protocol``): each returns
the field with its type or raises ``ProtocolError`` naming the document kind, the key and what it
found. Like the protocol, imports nothing heavy: ``InputSpec`` and ``Artifact`` load on first use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfguard.backends.base import Artifact
    from perfguard.models.inputs import InputSpec


class ProtocolError(ValueError):
    """A request or response document that does not follow the protocol (a perfguard bug)."""



def _get(data: Mapping[str, Any], key: str, kind: str) -> Any:
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{kind}: expected a JSON object, found {type(data).__name__}")
    if key not in data:
        raise ProtocolError(f"{kind}: missing field {key!r} (found: {', '.join(sorted(data)) or 'none'})")
    return data[key]


def _wrong(kind: str, key: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(f"{kind}: field {key!r} must be {expected}, found {value!r}")


def _str(data: Mapping[str, Any], key: str, kind: str) -> str:
    value = _get(data, key, kind)
    if not isinstance(value, str):
        raise _wrong(kind, key, "a string", value)
    return value


def _opt_str(data: Mapping[str, Any], key: str, kind: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _wrong(kind, key, "a string or null", value)
    return value


def _int(data: Mapping[str, Any], key: str, kind: str) -> int:
    value = _get(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(kind, key, "an integer", value)
    return value


def _opt_int(data: Mapping[str, Any], key: str, kind: str) -> int | None:
    return None if data.get(key) is None else _int(data, key, kind)


def _float(data: Mapping[str, Any], key: str, kind: str) -> float:
    value = _get(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(kind, key, "a number", value)
    return value  # an int stays an int: ``atol = 0`` prints as written


def _opt_float(data: Mapping[str, Any], key: str, kind: str) -> float | None:
    return None if data.get(key) is None else _float(data, key, kind)


def _bool(data: Mapping[str, Any], key: str, kind: str) -> bool:
    value = _get(data, key, kind)
    if not isinstance(value, bool):
        raise _wrong(kind, key, "true or false", value)
    return value


def _list(data: Mapping[str, Any], key: str, kind: str) -> list[Any]:
    value = _get(data, key, kind)
    if not isinstance(value, list):
        raise _wrong(kind, key, "a list", value)
    return value


def _object(data: Mapping[str, Any], key: str, kind: str) -> dict[str, Any]:
    value = _get(data, key, kind)
    if not isinstance(value, dict):
        raise _wrong(kind, key, "an object", value)
    return value


def _opt_object(data: Mapping[str, Any], key: str, kind: str) -> dict[str, Any] | None:
    return None if data.get(key) is None else _object(data, key, kind)


def _int_map(data: Mapping[str, Any], key: str, kind: str) -> dict[str, int]:
    value = _object(data, key, kind)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise _wrong(kind, key, "an object of integers", value)
    return dict(value)


def _artifact(data: Mapping[str, Any], key: str, kind: str) -> Artifact:
    from perfguard.backends.base import Artifact

    value = _object(data, key, kind)
    try:
        return Artifact.from_json(value)
    except TypeError as exc:
        raise ProtocolError(f"{kind}: field {key!r} is not an artifact: {exc}") from None


def _input_specs(data: Mapping[str, Any], kind: str) -> tuple[InputSpec, ...]:
    from perfguard.models.inputs import InputSpec

    try:
        return tuple(InputSpec.from_json(s) for s in _list(data, "input_specs", kind))
    except (KeyError, TypeError) as exc:
        raise ProtocolError(f"{kind}: field 'input_specs' holds an entry that is not an input spec: {exc}") from None


def _specs_json(specs: Sequence[InputSpec]) -> list[dict[str, Any]]:
    return [s.to_json() for s in specs]


def _options(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)
