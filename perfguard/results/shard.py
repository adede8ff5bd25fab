"""``ShardInfo``: which part of a sharded run or check a document holds (``--shard K/N``).

Written as the optional ``shard`` object of a result or verdicts document (absent when the run
was not sharded). ``perfguard merge`` reads it to refuse shards of different runs (suite hash,
commits, settings) and to name a missing or duplicated shard, and the full case list of the
whole lets it check that the shards cover the whole exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict


@dataclass(frozen=True)
class ShardInfo:
    """Shard ``k`` of ``n`` of one run: every case id of the whole (sorted), the suite file's
    hash, the compiler commits (``base_commit`` for a check against a ref; ``head_commit`` the
    working tree's, None outside git), the ``settings_sha256`` of everything else that decides what
    the shards measure (command, baseline, check settings, selection), and what balanced the
    partition (``costs``: ``history`` or ``static``)."""

    k: int
    n: int
    cases: tuple[str, ...]
    suite_sha256: str
    settings_sha256: str
    head_commit: str | None = None
    base_commit: str | None = None
    costs: str = "static"

    @property
    def label(self) -> str:
        return f"{self.k}/{self.n}"

    def run_key(self) -> tuple[object, ...]:
        """What every shard of one run shares (all but ``k``)."""
        return (self.n, self.cases, self.suite_sha256, self.settings_sha256, self.head_commit, self.base_commit)

    def to_json(self) -> JsonDict:
        return {"k": self.k, "n": self.n, "cases": list(self.cases), "suite_sha256": self.suite_sha256,
                "settings_sha256": self.settings_sha256, "head_commit": self.head_commit,
                "base_commit": self.base_commit, "costs": self.costs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShardInfo:
        kind = "shard"
        k, n = f.count(data, "k", kind), f.count(data, "n", kind)
        if n < 1 or not 1 <= k <= n:
            raise f.wrong_type(kind, "k", f"from 1 to n ({n})", k)
        return cls(k, n, f.string_list(data, "cases", kind), f.string(data, "suite_sha256", kind),
                   f.string(data, "settings_sha256", kind), f.opt_string(data, "head_commit", kind),
                   f.opt_string(data, "base_commit", kind), f.string(data, "costs", kind))
