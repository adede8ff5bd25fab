"""Readers of typed JSON fields, shared by the worker protocol (``perfguard.workers.protocol``) and
the persisted documents (``perfguard.results.result``...): each returns the field with its type or
raises ``FieldError`` naming the document kind, the key and what it found. Generic JSON only:
it imports no perfguard module but :mod:`perfguard.errors`, so any module may use it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from perfguard.errors import FieldError

#: A JSON value as perfguard writes it, with no ``Any``: what the ``to_json`` of a typed document
#: returns (a ``Sequence``/``Mapping`` so that a ``list[float]`` or a ``dict[str, int]`` is one).
JsonValue: TypeAlias = "None | bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue]"

#: A JSON object as perfguard writes it: the ``to_json`` of its typed documents and messages.
JsonDict: TypeAlias = "dict[str, JsonValue]"

def drop_none(data: Mapping[str, JsonValue]) -> JsonDict:
    """``data`` without its None values: a typed document's optional fields, absent when unset."""
    return {k: v for k, v in data.items() if v is not None}


#: The longest duration a document may hold, in seconds (about 116 days): no latency sample,
#: compile or measurement setting lasts longer, and the ratios of the statistics stay finite.
MAX_SECONDS = 1e7

#: The shortest positive duration, in seconds (a picosecond): no model runs faster, and a
#: smaller one (5e-324) turns a ratio of two latencies into infinity.
MIN_POSITIVE_SECONDS = 1e-12

#: The largest count or size (nodes, bytes, workers, rounds) a document may hold.
MAX_COUNT = 2**63 - 1


def field(data: Mapping[str, object], key: str, kind: str) -> object:
    if not isinstance(data, Mapping):
        raise FieldError(f"{kind}: expected a JSON object, found {type(data).__name__}")
    if key not in data:
        raise FieldError(f"{kind}: missing field {key!r} (found: {', '.join(sorted(data)) or 'none'})")
    return data[key]


def wrong_type(kind: str, key: str, expected: str, value: object) -> FieldError:
    return FieldError(f"{kind}: field {key!r} must be {expected}, found {value!r}")


def string(data: Mapping[str, object], key: str, kind: str) -> str:
    value = field(data, key, kind)
    if not isinstance(value, str):
        raise wrong_type(kind, key, "a string", value)
    return value


def opt_string(data: Mapping[str, object], key: str, kind: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise wrong_type(kind, key, "a string or null", value)
    return value


def integer(data: Mapping[str, object], key: str, kind: str) -> int:
    value = field(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(kind, key, "an integer", value)
    return value


def opt_integer(data: Mapping[str, object], key: str, kind: str) -> int | None:
    return None if data.get(key) is None else integer(data, key, kind)


def number(data: Mapping[str, object], key: str, kind: str) -> float:
    value = field(data, key, kind)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(kind, key, "a number", value)
    return value  # an int stays an int: ``atol = 0`` prints as written


def opt_number(data: Mapping[str, object], key: str, kind: str) -> float | None:
    return None if data.get(key) is None else number(data, key, kind)


def opt_boolean(data: Mapping[str, object], key: str, kind: str) -> bool | None:
    return None if data.get(key) is None else boolean(data, key, kind)


def boolean(data: Mapping[str, object], key: str, kind: str) -> bool:
    value = field(data, key, kind)
    if not isinstance(value, bool):
        raise wrong_type(kind, key, "true or false", value)
    return value


def array(data: Mapping[str, object], key: str, kind: str) -> list[object]:
    value = field(data, key, kind)
    if not isinstance(value, list):
        raise wrong_type(kind, key, "a list", value)
    return value


# The object readers return the raw JSON they found (read from a file: not yet typed); each
# document's ``from_json`` reads it further with the readers above.
def obj(data: Mapping[str, object], key: str, kind: str) -> dict[str, object]:
    value = field(data, key, kind)
    if not isinstance(value, dict):
        raise wrong_type(kind, key, "an object", value)
    return value


def opt_obj(data: Mapping[str, object], key: str, kind: str) -> dict[str, object] | None:
    return None if data.get(key) is None else obj(data, key, kind)


def json_value(value: object, where: str = "value") -> JsonValue:
    """``value`` (read by Python's JSON reader, or built by perfguard) as a JSON value: a FieldError
    naming ``where`` for anything else. It walks the whole value: for small objects kept as found
    (an explanation that does not read, a bisect document's parts), not for a result's samples."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):  # a tuple is written as a list
        return [json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return json_object(value, where)
    raise FieldError(f"{where}: {type(value).__name__} is not a JSON value")


def json_object(value: Mapping[str, object], where: str = "value") -> JsonDict:
    """A JSON object as :func:`json_value` checks it."""
    return {str(k): json_value(v, f"{where}.{k}") for k, v in value.items()}


def obj_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, dict[str, object]]:
    """An object whose every value is an object (models by name, fingerprints by runner)."""
    value = obj(data, key, kind)
    out = {k: v for k, v in value.items() if isinstance(v, dict)}
    if len(out) != len(value):
        raise wrong_type(kind, key, "an object of objects", value)
    return out


def opt_obj_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, dict[str, object]] | None:
    return None if data.get(key) is None else obj_map(data, key, kind)


def str_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, str]:
    value = obj(data, key, kind)
    out = {k: v for k, v in value.items() if isinstance(v, str)}
    if len(out) != len(value):
        raise wrong_type(kind, key, "an object of strings", value)
    return out


def int_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, int]:
    value = obj(data, key, kind)
    out = {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}
    if len(out) != len(value):
        raise wrong_type(kind, key, "an object of integers", value)
    return out


def number_list(data: Mapping[str, object], key: str, kind: str) -> tuple[float, ...]:
    values = array(data, key, kind)
    out = tuple(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if len(out) != len(values):
        raise wrong_type(kind, key, "a list of numbers", values)
    return out


def int_list(data: Mapping[str, object], key: str, kind: str) -> tuple[int, ...]:
    values = array(data, key, kind)
    out = tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    if len(out) != len(values):
        raise wrong_type(kind, key, "a list of integers", values)
    return out


def string_list(data: Mapping[str, object], key: str, kind: str) -> tuple[str, ...]:
    values = array(data, key, kind)
    out = tuple(v for v in values if isinstance(v, str))
    if len(out) != len(values):
        raise wrong_type(kind, key, "a list of strings", values)
    return out


def objects(data: Mapping[str, object], key: str, kind: str) -> list[dict[str, object]]:
    values = array(data, key, kind)
    out = [v for v in values if isinstance(v, dict)]
    if len(out) != len(values):
        raise wrong_type(kind, key, "a list of objects", values)
    return out


def json_obj(data: Mapping[str, object], key: str, kind: str) -> JsonDict:
    """A free-form object field (a fingerprint, a backend's settings) as a JSON object: its values
    checked by :func:`json_object`, a FieldError naming ``kind.key`` for anything else."""
    return json_object(obj(data, key, kind), f"{kind}.{key}")


def opt_json_obj(data: Mapping[str, object], key: str, kind: str) -> JsonDict | None:
    return None if data.get(key) is None else json_obj(data, key, kind)


def json_obj_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, JsonDict]:
    """An object of free-form objects (fingerprints by runner), each as :func:`json_obj` reads it."""
    return {k: json_object(v, f"{kind}.{key}.{k}") for k, v in obj_map(data, key, kind).items()}


def opt_json_obj_map(data: Mapping[str, object], key: str, kind: str) -> dict[str, JsonDict] | None:
    return None if data.get(key) is None else json_obj_map(data, key, kind)


def json_objects(data: Mapping[str, object], key: str, kind: str) -> tuple[JsonDict, ...]:
    """A list of free-form objects, each as :func:`json_obj` reads it."""
    return tuple(json_object(v, f"{kind}.{key}[{i}]") for i, v in enumerate(objects(data, key, kind)))


# --- numbers with a meaning: the readers of persisted documents check the value, not only its type


def _in_range(value: float, *, positive: bool) -> bool:
    if not math.isfinite(value):
        return False
    low_ok = value >= MIN_POSITIVE_SECONDS if positive else value >= 0
    return bool(low_ok and value <= MAX_SECONDS)


def _seconds_expected(positive: bool) -> str:
    low = f"at least {MIN_POSITIVE_SECONDS:g}" if positive else "0 or more"
    return f"a finite number of seconds, {low} and at most {MAX_SECONDS:g}"


def finite(data: Mapping[str, object], key: str, kind: str) -> float:
    """A number that is not NaN or infinite (a ratio, a p-value, an interval bound)."""
    value = number(data, key, kind)
    if not math.isfinite(value):
        raise wrong_type(kind, key, "a finite number", value)
    return value


def opt_finite(data: Mapping[str, object], key: str, kind: str) -> float | None:
    return None if data.get(key) is None else finite(data, key, kind)


def seconds(data: Mapping[str, object], key: str, kind: str, *, positive: bool = False) -> float:
    """A duration: finite, 0 or more (``positive``: a latency sample, above zero) and at most
    ``MAX_SECONDS``."""
    value = number(data, key, kind)  # a wrong type is worded as a wrong type
    if not _in_range(value, positive=positive):
        raise wrong_type(kind, key, _seconds_expected(positive), value)
    return value


def opt_seconds(data: Mapping[str, object], key: str, kind: str, *, positive: bool = False) -> float | None:
    return None if data.get(key) is None else seconds(data, key, kind, positive=positive)


def seconds_list(data: Mapping[str, object], key: str, kind: str, *, positive: bool = False) -> tuple[float, ...]:
    """A list of durations, each as :func:`seconds` reads one."""
    values = number_list(data, key, kind)
    for i, value in enumerate(values):
        if not _in_range(value, positive=positive):
            raise wrong_type(kind, f"{key}[{i}]", _seconds_expected(positive), value)
    return values


_COUNT_RANGE = "an integer from 0 to 2**63 - 1"


def nonnegative(data: Mapping[str, object], key: str, kind: str) -> float:
    """A finite number, 0 or more (a ratio, an interval bound, a p-value, a duration)."""
    value = finite(data, key, kind)
    if value < 0:
        raise wrong_type(kind, key, "a finite number, 0 or more", value)
    return value


def opt_nonnegative(data: Mapping[str, object], key: str, kind: str) -> float | None:
    return None if data.get(key) is None else nonnegative(data, key, kind)


def count(data: Mapping[str, object], key: str, kind: str) -> int:
    """A count or a size (nodes, bytes, workers, loops): an integer from 0 to ``MAX_COUNT``."""
    value = integer(data, key, kind)  # a wrong type is worded as a wrong type
    if not 0 <= value <= MAX_COUNT:
        raise wrong_type(kind, key, _COUNT_RANGE, value)
    return value


def opt_count(data: Mapping[str, object], key: str, kind: str) -> int | None:
    return None if data.get(key) is None else count(data, key, kind)


def count_list(data: Mapping[str, object], key: str, kind: str) -> tuple[int, ...]:
    values = int_list(data, key, kind)
    for i, value in enumerate(values):
        if not 0 <= value <= MAX_COUNT:
            raise wrong_type(kind, f"{key}[{i}]", _COUNT_RANGE, value)
    return values
