"""``ShardInfo``: which part of a sharded run or check a document holds (``--shard K/N``).

Written as the optional ``shard`` object of a result or verdicts document (absent when the run
was not sharded). ``perfguard merge`` reads it to refuse shards of different runs (suite hash,
commits, settings) and to name a missing or duplicated shard, and the full case list of the
whole lets it check that the shards cover the whole exactly once.

Format history of the object (``SHARD_VERSION``; its ``version`` key, absent in format 1):

1. k, n, cases (the whole), suite_sha256, settings_sha256, head_commit, base_commit, costs.
2. ``version``; ``part``: the case ids this shard was given; ``rows`` (a check's only): the
   (case, metric) of every verdict row it wrote. ``perfguard merge`` checks each shard's results and
   rows against them, so a shard whose rows were removed is refused. A format-1 object reads with
   neither (merge warns that it cannot check that shard's rows); a newer format is refused.

Counts are bounded before anything is sized by them: ``n`` at most ``MAX_SHARDS`` and at most the
number of cases (a shard that gets no case is refused when the parts are made).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perfguard import jsonfields as f
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict
from perfguard.suite.shards import MAX_SHARDS

#: The format of the ``shard`` object (see the format history above).
SHARD_VERSION = 2


@dataclass(frozen=True)
class ShardInfo:
    """Shard ``k`` of ``n`` of one run: every case id of the whole (sorted), the suite file's
    hash, the compiler commits (``base_commit`` for a check against a ref; ``head_commit`` the
    working tree's, None outside git), the ``settings_sha256`` of everything else that decides what
    the shards measure (command, baseline, check settings, selection), and what balanced the
    partition (``costs``: ``history`` or ``static``); from format 2, what this shard holds: its
    cases (``part``) and, for a check, its verdict rows (``rows``, (case, metric) pairs)."""

    k: int
    n: int
    cases: tuple[str, ...]
    suite_sha256: str
    settings_sha256: str
    head_commit: str | None = None
    base_commit: str | None = None
    costs: str = "static"
    part: tuple[str, ...] | None = None
    rows: tuple[tuple[str, str], ...] | None = None

    @property
    def version(self) -> int:
        """The object's format: 2 when it lists its part, 1 (an older writer's) when not."""
        return SHARD_VERSION if self.part is not None else 1

    @property
    def label(self) -> str:
        return f"{self.k}/{self.n}"

    def run_key(self) -> tuple[object, ...]:
        """What every shard of one run shares (all but ``k``)."""
        return (self.n, self.cases, self.suite_sha256, self.settings_sha256, self.head_commit, self.base_commit)

    def to_json(self) -> JsonDict:
        out: JsonDict = {"k": self.k, "n": self.n, "cases": list(self.cases), "suite_sha256": self.suite_sha256,
                         "settings_sha256": self.settings_sha256, "head_commit": self.head_commit,
                         "base_commit": self.base_commit, "costs": self.costs}
        if self.part is not None:
            out["version"] = self.version
            out["part"] = list(self.part)
            if self.rows is not None:
                out["rows"] = [[case, metric] for case, metric in self.rows]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ShardInfo:
        kind = "shard"
        version = f.integer(data, "version", kind) if "version" in data else 1
        if not 1 <= version <= SHARD_VERSION:
            raise FieldError(f"{kind}: format {version} is newer than this perfguard reads ({SHARD_VERSION}); "
                               "upgrade perfguard")
        k, n = f.count(data, "k", kind), f.count(data, "n", kind)
        cases = f.string_list(data, "cases", kind)
        if not 1 <= n <= min(MAX_SHARDS, len(cases)):
            raise f.wrong_type(kind, "n", f"from 1 to {MAX_SHARDS} and at most the {len(cases)} case(s)", n)
        if not 1 <= k <= n:
            raise f.wrong_type(kind, "k", f"from 1 to n ({n})", k)
        part = f.string_list(data, "part", kind) if version >= 2 else None
        rows = _rows(data["rows"], kind) if version >= 2 and "rows" in data else None
        return cls(k, n, cases, f.string(data, "suite_sha256", kind),
                   f.string(data, "settings_sha256", kind), f.opt_string(data, "head_commit", kind),
                   f.opt_string(data, "base_commit", kind), f.string(data, "costs", kind), part, rows)


def _rows(rows: object, kind: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rows):
        raise FieldError(f"{kind}: field 'rows' must be a list of [case, metric] pairs")
    return tuple((r[0], r[1]) for r in rows)
