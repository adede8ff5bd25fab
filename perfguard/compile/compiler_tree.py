"""The compiler's pass folder as the artifact cache (``perfguard.compile.cache``) keys it: the git
tree hash of the folder at its repository's HEAD when the folder holds exactly that, else the
files that keep it from one (modified or untracked), so that "not cacheable" can name them.

Ignored files (build outputs), Python's bytecode caches and the cache folder itself are not
changes of the sources. ``git status`` is read with ``-z``: a file name is taken as it is (a
quote, a newline or bytes that are not UTF-8 included), never unquoted by hand; it is data, shown
through :func:`perfguard.names.visible` by :func:`uncommitted_text`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: How many of the files that keep a folder from a tree hash a message names before "and N more".
NAMED_FILES = 3


@dataclass(frozen=True)
class CompilerTree:
    """The folder's tree hash (None: uncommitted changes, or not in git) and the changed files
    that made it None, relative to the folder, sorted (empty outside git)."""

    tree: str | None
    uncommitted: tuple[str, ...] = ()


def _git(path: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=False,
                              errors="surrogateescape", stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def read_compiler_tree(path: Path, cache_root: Path | None = None) -> CompilerTree:
    """The tree hash of the folder ``path`` at HEAD when it holds exactly that (the cache folder
    ``cache_root`` aside), else the files that differ."""
    tree = _git(path, "rev-parse", "--verify", "--quiet", "HEAD:./")
    top = _git(path, "rev-parse", "--show-toplevel")
    status = _git(path, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".")
    if tree is None or top is None or status is None:
        return CompilerTree(None)
    root, folder = Path(top.strip()), Path(path).resolve()
    skip = cache_root.resolve() if cache_root is not None else None
    changed = sorted({_relative(root / name, folder) for name in _status_paths(status) if _changed(root, name, skip)})
    return CompilerTree(None if changed else tree.strip(), tuple(changed))


def _status_paths(status: str) -> Iterator[str]:
    """The paths of ``git status --porcelain -z`` (relative to the repository's root); a rename's
    or a copy's source, the field after it, is not a path of the tree."""
    fields = iter(status.split("\0"))
    for field in fields:
        if len(field) > 3:
            yield field[3:]
            if field[0] in "RC":
                next(fields, None)


def _relative(path: Path, folder: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(folder)) if resolved.is_relative_to(folder) else str(path)


def _changed(top: Path, path: str, skip: Path | None) -> bool:
    """A changed path (relative to the repository's root ``top``) that is a change of the
    sources: not Python's bytecode cache (which importing the user passes writes beside them when
    no .gitignore hides it), nor a file under ``skip``."""
    path = path.rstrip("/")
    if not path or "__pycache__" in Path(path).parts or path.endswith((".pyc", ".pyo")):
        return False
    return skip is None or not (top / path).resolve().is_relative_to(skip)


def uncommitted_text(folder: str, names: Sequence[str]) -> str:
    """``uncommitted under FOLDER: 'a', 'b', 'c' and 2 more``: the first :data:`NAMED_FILES`
    names quoted, each escaped (no control character reaches a terminal line)."""
    from perfguard.names import visible

    shown = ", ".join(f"'{visible(name)}'" for name in names[:NAMED_FILES])
    rest = len(names) - NAMED_FILES
    return f"uncommitted under {visible(folder)}: {shown}" + (f" and {rest} more" if rest > 0 else "")
