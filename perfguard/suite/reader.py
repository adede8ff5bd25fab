"""Typed reads out of a parsed suite file, with errors that name the file and the key.

Every message reads ``FILE: KEY: expected WHAT, found WHAT`` (with close valid names for an
unknown key), whichever table the value sits in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from perfguard.errors import UserError, did_you_mean


class Reader:
    """Reads typed values out of the parsed TOML, with errors that name file and key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.path}: {key}: {message}")

    # A TOML table as tomllib returns it (untyped), before each key is checked.
    def table(self, value: object, key: str, allowed: tuple[str, ...] | None = None) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, found {describe(value)}")
        if allowed is not None:
            for name in value:
                if name not in allowed:
                    raise self.fail(
                        f"{key}.{name}" if key else name,
                        f"unknown key{did_you_mean(name, allowed, most=1)}; expected one of: {', '.join(allowed)}",
                    )
        return value

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"expected a non-empty string, found {describe(value)}")
        return value

    def positive_int(self, value: object, key: str, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, found {describe(value)}")
        return value

    def non_negative_float(self, value: object, key: str) -> float:
        # TOML has nan and inf literals: refused like a negative number.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise self.fail(key, f"expected a number >= 0 and finite, found {describe(value)}")
        return float(value)

    def percent(self, value: object, key: str) -> float:
        """A percentage written with its sign (``"2%"``), returned as a fraction (0.02)."""
        text = value.strip() if isinstance(value, str) else ""
        try:
            number = float(text[:-1]) if text.endswith("%") else -1.0
        except ValueError:
            number = -1.0
        if not 0 <= number < 100:
            raise self.fail(key, f"expected a percentage such as \"2%\", found {describe(value)}")
        return number / 100

    def string_list(self, value: object, key: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, f"expected a list of strings, found {describe(value)}")
        return list(value)


def describe(value: object) -> str:
    kind = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)
    text = json.dumps(value, default=str)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"
