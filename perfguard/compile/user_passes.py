"""Check, before any work, that every user pass of a suite imports and names a function.

A user pass is ``package.module:function`` from the compiler under test (``[compiler] path``). The
compile workers import it; a typo there would only surface as a failed compile per case, after the
models were built. :class:`UserPassCheck` imports them up front, in a child process, so

* the check sees the working tree's ``[compiler] path`` exactly as a compile worker does, and
* nothing lands in this process's ``sys.modules`` (``check --base-ref`` and bisection later compile
  the same module names from other checkouts; a cached import would shadow them).

A missing module or function is refused with close names ("did you mean").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from perfguard import children
from perfguard.errors import UserError, unknown_name_message

#: Seconds the child may take to import the compiler's modules (a compiler may import a framework).
IMPORT_TIMEOUT_S = 300.0

# Runs in the child: ``python -c _PROBE REQUEST.json RESPONSE.json``. Keep it self-contained.
_PROBE = r'''
import importlib, json, pkgutil, sys
request = json.load(open(sys.argv[1]))
if request["path"]:
    sys.path.insert(0, request["path"])
out = {}
for name in request["names"]:
    module_name, _, func_name = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if missing == module_name or module_name.startswith(missing + "."):
            parent = missing.rpartition(".")[0]
            search = None
            if parent:
                try:
                    search = list(getattr(importlib.import_module(parent), "__path__", []))
                except Exception:
                    search = []
            elif request["path"]:
                search = [request["path"]]
            prefix = parent + "." if parent else ""
            found = sorted({prefix + m.name for m in pkgutil.iter_modules(search)}) if search is not None else []
            out[name] = {"error": "no_module", "missing": missing, "candidates": found}
        else:
            out[name] = {"error": "import", "message": "ModuleNotFoundError: " + str(exc)}
        continue
    except BaseException as exc:
        out[name] = {"error": "import", "message": type(exc).__name__ + ": " + str(exc)}
        continue
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        public = {k: v for k, v in vars(module).items() if not k.startswith("_") and callable(v)}
        own = [k for k, v in public.items() if getattr(v, "__module__", None) == module.__name__]
        out[name] = {"error": "no_function" if func is None else "not_callable",
                     "type": type(func).__name__, "candidates": sorted(own or public)}
    else:
        out[name] = {"ok": True}
json.dump(out, open(sys.argv[2], "w"))
'''


class UserPassProbe:
    """Import each ``module:function`` in a child process with ``path`` first on ``sys.path``,
    started at construction; :meth:`outcomes` waits for it. A job starts it before it builds its
    models (the child's imports, about 1.3 s for a pass module that imports onnx, overlap that
    work) and waits for it before any compile."""

    def __init__(self, names: Iterable[str], path: Path | None) -> None:
        self.names = sorted(set(names))
        self.proc: subprocess.Popen[str] | None = None
        if not self.names:
            return
        self.folder = tempfile.TemporaryDirectory(prefix="perfguard-passes-")
        request, self.response = Path(self.folder.name) / "request.json", Path(self.folder.name) / "response.json"
        request.write_text(json.dumps({"names": self.names, "path": str(path) if path else None}))
        env = dict(os.environ, PERFGUARD_WORKER_MODE="check")
        try:
            self.proc = children.popen([sys.executable, "-c", _PROBE, str(request), str(self.response)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, env=env)
        except BaseException:  # a signal while it started: its folder goes now, nobody will close it
            self.folder.cleanup()
            raise

    def outcomes(self) -> dict[str, Mapping[str, object]]:
        """Per name ``{"ok": True}`` or ``{"error": kind, ...}``; ``UserError`` when the child
        itself fails or hangs (it never runs user code outside the imports)."""
        if self.proc is None:
            return {}
        names = ", ".join(self.names)
        try:
            _, stderr = self.proc.communicate(timeout=IMPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.close()
            raise UserError(f"importing the user passes ({names}) took over {IMPORT_TIMEOUT_S:g} s; "
                            "does a module of the compiler hang on import?") from None
        try:
            found = json.loads(self.response.read_text())
            return {str(k): v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}
        except (OSError, ValueError):
            tail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {self.proc.returncode}"
            raise UserError(f"importing the user passes ({names}) crashed the checking process: "
                            f"{tail[:200]}") from None
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child if it still runs and remove its files (idempotent)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            children.kill_group(self.proc)  # its imports may have started processes of their own
            self.proc.communicate()
        children.forget(self.proc)
        self.folder.cleanup()


def user_pass_message(name: str, outcome: Mapping[str, object], path: Path | None,
                      noun: str = "user pass") -> str | None:
    """One line for a user pass (or another ``module:function`` of the compiler's path, ``noun``:
    a model's callable) that does not resolve (``None`` when it does)."""
    if outcome.get("ok"):
        return None
    module_name, _, func_name = name.partition(":")
    where = f"[compiler] path {path}" if path else "sys.path (no [compiler] path is set)"
    kind = outcome.get("error")
    if kind == "no_module":
        missing = str(outcome.get("missing") or module_name)
        candidates = _candidates(outcome)
        if candidates:
            return f"{noun} {name!r}: " + unknown_name_message("module", missing, candidates) + f" (in {where})"
        return f"{noun} {name!r}: no module {missing!r} in {where}"
    if kind in ("no_function", "not_callable"):
        candidates = _candidates(outcome)
        if kind == "not_callable":
            return (f"{noun} {name!r}: {module_name}.{func_name} is not a function (its type is "
                    f"{outcome.get('type')}); give a function")
        if candidates:
            return f"{noun} {name!r}: module {module_name} has no " + unknown_name_message(
                "function", func_name, candidates).removeprefix("unknown ")
        return f"{noun} {name!r}: module {module_name} has no function {func_name!r} (it defines no public function)"
    return f"{noun} {name!r}: cannot import {module_name}: {str(outcome.get('message', ''))[:300]}"


def _candidates(outcome: Mapping[str, object]) -> list[str]:
    """The names the child found instead (it writes a list of strings)."""
    found = outcome.get("candidates")
    return [str(c) for c in found] if isinstance(found, list) else []


class UserPassCheck:
    """Refuse the first user pass (``where``: the suite key naming it) that does not resolve: the
    child that imports them starts at construction, :meth:`wait` refuses with the first bad one,
    :meth:`close` drops a check nobody waits for."""

    def __init__(self, names_by_where: dict[str, list[str]], path: Path | None,
                 nouns: Mapping[str, str] | None = None) -> None:
        # ``nouns``: what the names under a ``where`` are, when not user passes (a model's callable).
        self.names_by_where, self.path, self.nouns = names_by_where, path, dict(nouns or {})
        self.probe = UserPassProbe([n for names in names_by_where.values() for n in names], path)

    def wait(self) -> None:
        _refuse(self.names_by_where, self.probe.outcomes(), self.path, self.nouns)

    def close(self) -> None:
        self.probe.close()


def _refuse(names_by_where: dict[str, list[str]], outcomes: dict[str, Mapping[str, object]],
            path: Path | None, nouns: Mapping[str, str]) -> None:
    for where, names in names_by_where.items():
        for name in names:
            message = user_pass_message(name, outcomes.get(name, {"ok": True}), path, nouns.get(where, "user pass"))
            if message:
                raise UserError(f"{where}: {message}")
