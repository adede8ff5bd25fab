"""Readers of typed JSON fields, shared by the worker protocol (``perfguard.measure.protocol``) and
the persisted documents (``perfguard.results.result``...): each returns the field with its type or
raises ``FieldError`` naming the document kind, the key and what it found. Generic JSON only:
it imports no perfguard module, so any module may use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A free-form JSON object: a part of a document whose keys are not perfguard's to fix (a runner
#: fingerprint, a model's source parameters, a backend's settings, device telemetry).
JsonObject = dict[str, Any]


class FieldError(ValueError):
    """A JSON document whose field is missing or of the wrong type."""


#: A worker request or response that does not follow the protocol (a perfguard bug).
ProtocolError = FieldError



def field(data: Mapping[str, Any], key: str, kind: str) -> Any:
    if not isinstance(data, Mapping):
        raise FieldError(f"{kind}: expected a JSON object, found {type(data).__name__}")
    if key not in data:
        raise FieldError(f"{kind}: missing field {key!r} (found: {', '.join(sorted(data)) or 'none'})")
    return data[key]


def wrong_type(kind: str, key: str, expected: str, value: Any) -> FieldError:
    return FieldError(f"{kind}: field {key!r} must be {expected}, found {value!r}")


def string(data: Mapping[str, Any], key: str, kind: str) -> str:
    value = field(data, key, kind)
    if not isinstance(value, str):
        raise wrong_type(kind, key, "a string", value)
    return value


def opt_string(data: Mapping[str, Any], key: str, kind: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise wrong_type(kind, key, "a string or null", value)
    return value


def integer(data: Mapping[str, Any], key: str, kind: str) -> int:
    value = field(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(kind, key, "an integer", value)
    return value


def opt_integer(data: Mapping[str, Any], key: str, kind: str) -> int | None:
    return None if data.get(key) is None else integer(data, key, kind)


def number(data: Mapping[str, Any], key: str, kind: str) -> float:
    value = field(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(kind, key, "a number", value)
    return value  # an int stays an int: ``atol = 0`` prints as written


def opt_number(data: Mapping[str, Any], key: str, kind: str) -> float | None:
    return None if data.get(key) is None else number(data, key, kind)


def boolean(data: Mapping[str, Any], key: str, kind: str) -> bool:
    value = field(data, key, kind)
    if not isinstance(value, bool):
        raise wrong_type(kind, key, "true or false", value)
    return value


def array(data: Mapping[str, Any], key: str, kind: str) -> list[Any]:
    value = field(data, key, kind)
    if not isinstance(value, list):
        raise wrong_type(kind, key, "a list", value)
    return value


def obj(data: Mapping[str, Any], key: str, kind: str) -> dict[str, Any]:
    value = field(data, key, kind)
    if not isinstance(value, dict):
        raise wrong_type(kind, key, "an object", value)
    return value


def opt_obj(data: Mapping[str, Any], key: str, kind: str) -> dict[str, Any] | None:
    return None if data.get(key) is None else obj(data, key, kind)


def int_map(data: Mapping[str, Any], key: str, kind: str) -> dict[str, int]:
    value = obj(data, key, kind)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise wrong_type(kind, key, "an object of integers", value)
    return dict(value)


def number_list(data: Mapping[str, Any], key: str, kind: str) -> tuple[float, ...]:
    values = array(data, key, kind)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise wrong_type(kind, key, "a list of numbers", values)
    return tuple(values)


def int_list(data: Mapping[str, Any], key: str, kind: str) -> tuple[int, ...]:
    values = array(data, key, kind)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise wrong_type(kind, key, "a list of integers", values)
    return tuple(values)


def string_list(data: Mapping[str, Any], key: str, kind: str) -> tuple[str, ...]:
    values = array(data, key, kind)
    if not all(isinstance(v, str) for v in values):
        raise wrong_type(kind, key, "a list of strings", values)
    return tuple(values)


def objects(data: Mapping[str, Any], key: str, kind: str) -> list[dict[str, Any]]:
    values = array(data, key, kind)
    if not all(isinstance(v, dict) for v in values):
        raise wrong_type(kind, key, "a list of objects", values)
    return values
