"""The IREE command-line tools behind the ``iree`` backend: where they are, what they accept, and a
cache of compiled artifacts.

Tools are looked up in ``$PERFGUARD_IREE_BIN`` (a folder holding ``iree-compile``, ``iree-opt`` and
``iree-import-onnx``, e.g. a compiler build under test), then in the installed ``iree-base-compiler``
package (its native binaries, not the Python wrappers, so that killing a tool kills the compiler),
then beside the running Python (console scripts), then on ``PATH``. What a compiler accepts (its flag
names from ``iree-compile --help-hidden``, its passes from ``iree-opt --list-passes``) is parsed once
per compiler version and cached as JSON under the cache folder.

Cache folder: ``$PERFGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/perfguard``, else
``~/.cache/perfguard``. Compiled artifacts live under ``iree/artifacts/KEY/``, where KEY hashes the
model bytes, the pinned compile settings, the compiler version and (for ``target_cpu = "host"``) the
host CPU; the oldest entries are pruned past ``$PERFGUARD_IREE_CACHE_MAX_MB`` (default 2048).
``PERFGUARD_IREE_CACHE=off`` turns the artifact cache off.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from perfguard.atomic import write_atomic
from perfguard.errors import StorageError, UserError
from perfguard.units import SIZE_UNITS

INSTALL_HINT = "install them with: pip install 'perfguard[iree]'"
TOOLS = ("iree-compile", "iree-opt", "iree-import-onnx")
_FLAG_LINE = re.compile(r"^  --([A-Za-z0-9][\w.\-]*)(?:=<[^>]*>)?\s+- +(.*)$")
_PASS_LINE = re.compile(r"^  --([A-Za-z0-9][\w.\-]*)\s+- +(.*)$")


def tool_path(name: str) -> str:
    """Absolute path of an IREE tool; ``UserError`` with the install hint when it is missing."""
    override = os.environ.get("PERFGUARD_IREE_BIN")
    if not override:
        native = _packaged_binary(name)
        if native:
            return native
    folders = [override] if override else [os.path.dirname(sys.executable)]
    for folder in folders:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    if override:
        raise UserError(f"backend 'iree': {name} not found in PERFGUARD_IREE_BIN={override}")
    found = shutil.which(name)
    if found:
        return found
    raise UserError(f"backend 'iree' needs the IREE compiler tools ({', '.join(TOOLS)}), and {name} was not "
                    f"found beside {sys.executable} or on PATH; {INSTALL_HINT}")


def _packaged_binary(name: str) -> str | None:
    """The native binary inside the pip package: its console script is a Python wrapper that runs
    the binary as a child, which a kill of the wrapper would leave running."""
    if name == "iree-import-onnx":
        return None  # a Python tool; its console script is the tool itself
    try:
        from iree.compiler.tools.binaries import find_tool

        path = os.path.realpath(find_tool(name))
    except Exception:  # iree-base-compiler missing or without this tool
        return None
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to kill the tool when the compile worker dies (a timeout kills only the worker)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a tool so that it cannot outlive the process that started it."""
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen(args, preexec_fn=preexec, **kwargs)


def run_tool(args: list[str], stdin: bytes | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    proc = popen(args, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@cache
def compiler_version() -> str:
    """``iree-compile --version``'s version line, e.g. ``3.13.0rc20261016 @ 89ece87...``."""
    text = run_tool([tool_path("iree-compile"), "--version"]).stdout.decode(errors="replace")
    match = re.search(r"IREE compiler version (\S+(?: @ \S+)?)", text)
    return match.group(1) if match else (text.strip().splitlines() or ["unknown"])[0]


def cache_root() -> Path:
    if os.environ.get("PERFGUARD_CACHE_DIR"):
        return Path(os.environ["PERFGUARD_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfguard"


def _cached_listing(kind: str, produce: Any) -> dict[str, str]:
    """A name -> summary listing for this compiler version, parsed once and kept as JSON."""
    digest = hashlib.sha256(f"{compiler_version()}|{tool_path('iree-compile')}".encode()).hexdigest()[:16]
    path = cache_root() / "iree" / f"{kind}-{digest}.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    listing: dict[str, str] = produce()
    try:
        write_atomic(path, json.dumps(listing, sort_keys=True))
    except StorageError:
        pass  # a read-only cache folder costs a re-parse next time, nothing else
    return listing


def _parse_listing(text: str, pattern: re.Pattern[str]) -> dict[str, str]:
    listing: dict[str, str] = {}
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            listing.setdefault(match.group(1), match.group(2).strip())
    return listing


@cache
def compiler_flags() -> dict[str, str]:
    """Every option ``iree-compile --help-hidden`` lists (name without ``--`` -> summary)."""
    def produce() -> dict[str, str]:
        text = run_tool([tool_path("iree-compile"), "--help-hidden"]).stdout.decode(errors="replace")
        return _parse_listing(text, _FLAG_LINE)

    return _cached_listing("flags", produce)


@cache
def registered_passes() -> dict[str, str]:
    """Every pass ``iree-opt --list-passes`` registers (argument -> summary)."""
    def produce() -> dict[str, str]:
        result = run_tool([tool_path("iree-opt"), "--list-passes"])
        text = (result.stdout + result.stderr).decode(errors="replace")
        return _parse_listing(text, _PASS_LINE)

    return _cached_listing("passes", produce)


def first_error(stderr: str, limit: int = 400) -> str:
    """The telling lines of a tool's error output: MLIR/LLVM error lines, without location noise."""
    lines = [re.sub(r"^(<unknown>|-|<stdin>)(:\d+)+: error:\s*", "", line.strip()) for line in stderr.splitlines()]
    lines = [line for line in lines if line and line != "^"]
    telling = [line for line in lines
               if re.search(r"error|invalid|failed|unknown|not |can.t|cannot|expected|crash|assert", line, re.I)]
    chosen = " / ".join(dict.fromkeys(telling[:3])) if telling else (lines[-1] if lines else "no error output")
    return chosen[:limit]


@cache
def host_cpu_id() -> str:
    """What ``target_cpu = "host"`` resolves to, for cache keys: CPU model and feature flags."""
    model, flags = platform.processor(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = value.strip()
    except OSError:
        pass
    return hashlib.sha256(f"{platform.machine()}|{model}|{flags}".encode()).hexdigest()[:16]


class ArtifactCache:
    """Compiled modules by key: ``KEY/module.vmfb`` plus ``KEY/trace.json``; writes are atomic renames."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "iree" / "artifacts"
        self.enabled = os.environ.get("PERFGUARD_IREE_CACHE", "on").lower() not in ("off", "0", "false", "no")
        # A bare number of MiB, whatever the name says ("MB" is 10**6 bytes elsewhere: perfguard.units).
        self.max_bytes = int(float(os.environ.get("PERFGUARD_IREE_CACHE_MAX_MB", "2048")) * SIZE_UNITS["MiB"])

    def lookup(self, key: str) -> Path | None:
        entry = self.root / key
        if not self.enabled or not (entry / "module.vmfb").is_file() or not (entry / "trace.json").is_file():
            return None
        try:
            os.utime(entry)  # keep recently used entries through pruning
        except OSError:
            pass
        return entry

    def store(self, key: str, vmfb: Path, trace: Mapping[str, object]) -> None:
        if not self.enabled:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
            shutil.copyfile(vmfb, staging / "module.vmfb")
            (staging / "trace.json").write_text(json.dumps(trace, sort_keys=True))
            try:  # publishes the whole folder at once; rename(2) fails if the entry exists already
                os.rename(staging, self.root / key)
            except OSError:  # another run stored the same key first
                shutil.rmtree(staging, ignore_errors=True)
            self.prune()
        except OSError:
            pass  # a cache that cannot be written only costs a recompile

    def prune(self) -> None:
        entries = []
        for entry in self.root.iterdir():
            if entry.is_dir() and not entry.name.startswith("."):
                size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
                entries.append((entry.stat().st_mtime, size, entry))
        total = sum(size for _, size, _ in entries)
        for _, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            shutil.rmtree(entry, ignore_errors=True)
            total -= size
