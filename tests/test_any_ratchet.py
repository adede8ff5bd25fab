"""The ``Any`` ratchet (issue 36): lines of ``perfguard/`` that name ``Any`` outside imports, and
lines with ``dict[str, Any]`` or ``JsonObject`` (a free-form JSON object), may only go down. The
caps are what the code reached; lower them when a change removes more, never raise them: a new
document is a typed frozen dataclass, a JSON value read from a file is ``object`` narrowed by the
readers of :mod:`perfguard.jsonfields`, and what stays free-form is another tool's JSON.

The counts are the issue's commands, in Python:
``grep -rwn Any perfguard --include=*.py | grep -v import | wc -l`` and
``grep -rn "dict\\[str, Any\\]\\|JsonObject" perfguard --include=*.py | wc -l``.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "perfguard"

#: Lines naming ``Any`` outside imports (464 when the ratchet was set up, issue 36: 218 or fewer).
ANY_CAP = 175
#: Lines with ``dict[str, Any]`` or ``JsonObject`` (145 then; issue 36: 62 or fewer).
FREE_FORM_CAP = 18

_ANY = re.compile(r"\bAny\b")


def _lines() -> list[str]:
    return [line for path in sorted(PACKAGE.rglob("*.py")) for line in path.read_text(encoding="utf-8").splitlines()]


def test_lines_naming_any_stay_at_or_below_the_cap():
    found = sum(1 for line in _lines() if _ANY.search(line) and "import" not in line)
    assert found <= ANY_CAP, f"{found} lines name Any outside imports (cap {ANY_CAP}): type the new ones"


def test_free_form_json_objects_stay_at_or_below_the_cap():
    found = sum(1 for line in _lines() if "dict[str, Any]" in line or "JsonObject" in line)
    assert found <= FREE_FORM_CAP, f"{found} lines with dict[str, Any] or JsonObject (cap {FREE_FORM_CAP})"
