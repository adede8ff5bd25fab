"""The counted worker's side (``perfguard.counting.valgrind``): one process under callgrind serves a
``count_batch`` request, every count of a job, each in a child forked from it (see
:func:`do_count_batch` for why). A ``count`` item: load
one artifact, warm it up uninstrumented (``warmup`` inferences, cheap: ~10x native), switch
instrumentation on, run one more inference so the simulated caches hold the model (~100x
native), then count one window, dumped as its own profile ``ID|N`` (``inferences`` of them).
The parent turns it into per-inference counts (``perfguard.counting.take``).

Why one window: the per-inference figure is the window of N over N (it keeps the fixed cost of
opening a window, a few thousand instructions). A second window of one inference, for the
difference of the two over N - 1, spread 20x more in the A/A (docs/measured.md, "Counted
evidence") and cost a fifth of a count's instrumented work, so it is gone.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from perfguard.jsonfields import (
    JsonDict,
    array as _list,
    integer as _int,
    obj as _object,
    string as _str,
)
from perfguard.runners.options import RunnerOptions
from perfguard.workers.protocol import CompileRequest, MeasureVariant, _input_specs, _specs_json

if TYPE_CHECKING:
    from pathlib import Path

    from perfguard.models.inputs import InputSpec

MODE = "count"
COMPILE_MODE = "count_compile"
BATCH_MODE = "count_batch"
#: Inferences run instrumented before the window with the cache simulation on: the simulated
#: caches then hold the model (without it nothing is warmed by them: 0).
INSTRUMENTED_WARMUP = 1


def window_label(variant: str, inferences: int, index: int | None = None) -> str:
    """The label a window's dump carries: the variant id and its inferences, and with ``index``
    the ``index``-th window of one inference of a count of ``inferences`` (protocol 4)."""
    return f"{variant}|{inferences}" if index is None else f"{variant}|{inferences}|{index}"


@dataclass(frozen=True)
class CountResponse:
    """What a counted worker did: ``valgrind`` (how many Valgrinds it ran under: 0 means the
    windows counted nothing), its ``pid`` (its profiles are ``callgrind.out.PID.N``), and the
    events of the tools a counted compile ran as subprocesses, counted whole, by step label
    (``processes``: ``backends.counting_hooks.COUNT_PROCESS``)."""

    valgrind: int
    pid: int
    windows: tuple[str, ...]
    processes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json(self) -> JsonDict:
        return {"valgrind": self.valgrind, "pid": self.pid, "windows": list(self.windows),
                "processes": {label: dict(events) for label, events in self.processes.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountResponse:
        kind = "count response"
        found = data.get("processes") or {}
        if not isinstance(found, Mapping) or not all(isinstance(e, Mapping) for e in found.values()):
            raise ValueError(f"{kind}: processes is not an object of event objects")
        processes = {str(label): {str(k): int(v) for k, v in events.items()} for label, events in found.items()}
        return cls(_int(data, "valgrind", kind), _int(data, "pid", kind),
                   tuple(str(w) for w in _list(data, "windows", kind)), processes)


@dataclass(frozen=True)
class CountRequest:
    """Count ``variant`` on ``runner``: ``warmup`` inferences before instrumentation starts and
    ``instrumented_warmup`` after (1 with the cache simulation), then a window of
    ``inferences``; inputs seeded ``seed``."""

    mode: ClassVar[str] = MODE
    variant: MeasureVariant
    runner: str
    runner_options: RunnerOptions
    warmup: int
    inferences: int
    seed: int
    input_specs: tuple[InputSpec, ...]
    instrumented_warmup: int = INSTRUMENTED_WARMUP

    @property
    def threads(self) -> int:
        return 1

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.variant.artifact.backend,)

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "variant": self.variant.to_json(), "runner": self.runner,
                "runner_options": self.runner_options.to_json(), "warmup": self.warmup,
                "inferences": self.inferences, "seed": self.seed, "input_specs": _specs_json(self.input_specs),
                "instrumented_warmup": self.instrumented_warmup}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountRequest:
        kind = "count request"
        return cls(MeasureVariant.from_json(_object(data, "variant", kind)), _str(data, "runner", kind),
                   RunnerOptions.from_json(_object(data, "runner_options", kind)), _int(data, "warmup", kind),
                   _int(data, "inferences", kind), _int(data, "seed", kind), _input_specs(data, kind),
                   _int(data, "instrumented_warmup", kind))

    def parse_response(self, data: Mapping[str, object]) -> CountResponse:
        return CountResponse.from_json(data)


def do_count(request: CountRequest) -> CountResponse:
    """The worker side of a ``count`` request (see the module's docstring)."""
    from perfguard.backends import get_backend
    from perfguard.backends.base import bound_step
    from perfguard.counting.valgrind import ClientRequests
    from perfguard.models.inputs import make_feeds
    from perfguard.runners import get_runner

    _mmap_large_allocations()
    artifact = request.variant.artifact
    backend = get_backend(artifact.backend)
    backend.require("counts")
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    step = bound_step(backend.load(artifact, runner, 1), feeds)  # runs the first warm-up inference
    for _ in range(max(1, request.warmup) - 1):
        step()
    client = ClientRequests()
    gc.collect()
    gc.disable()  # a collection inside a window would count the heap, not the model
    try:
        labels = [window_label(request.variant.id, request.inferences, k) for k in range(request.inferences)]
        windows = [client.window(label) for label in labels]  # prepared before the first: they allocate
        client.start()
        for _ in range(request.instrumented_warmup):
            step()
        for zero, dump in windows:
            zero()
            step()
            dump()
        client.stop()
    finally:
        gc.enable()
    return CountResponse(client.running(), os.getpid(), tuple(labels))


#: glibc's ``M_MMAP_THRESHOLD`` (``mallopt``), and the size from which a counted run's child maps
#: each allocation: every smaller chunk is served by the tcache (at most 1,032 bytes), every
#: larger one by ``mmap``, so no allocation inside a window searches glibc's bins, whose cost
#: depends on what the process did before (docs/measured.md, "Exact on every model").
M_MMAP_THRESHOLD, MMAP_FROM_BYTES = -3, 1040


def _mmap_large_allocations() -> None:
    """From here on, every allocation above the tcache's largest is its own mapping (a counted
    run's child only: a compile allocates too much for a mapping each)."""
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_FROM_BYTES)
    except (OSError, AttributeError):  # not glibc: its allocator is what it is
        pass


@dataclass(frozen=True)
class CountCompileRequest:
    """Compile once as ``compile`` says (into its ``out_dir``: a scratch folder), instrumented,
    with a counted window around each piece of real work (``backends.counting_hooks.COUNT_WINDOW``); no
    reference run and no correctness check (the real compile did those)."""

    mode: ClassVar[str] = COMPILE_MODE
    compile: CompileRequest

    @property
    def threads(self) -> int:
        return 1

    @property
    def backends(self) -> tuple[str, ...]:
        return self.compile.backends

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "compile": self.compile.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountCompileRequest:
        return cls(CompileRequest.from_json(_object(data, "compile", "count compile request")))

    def parse_response(self, data: Mapping[str, object]) -> CountResponse:
        return CountResponse.from_json(data)


def do_count_compile(request: CountCompileRequest) -> CountResponse:
    """The worker side of a ``count_compile`` request: every window is dumped with its label."""
    import sys
    from pathlib import Path

    from perfguard.backends import get_backend
    from perfguard.backends.counting_hooks import COUNT_PROCESS, COUNT_WINDOW
    from perfguard.counting.valgrind import ClientRequests
    from perfguard.errors import CountedCompileDone
    from perfguard.suite import PipelineSpec

    compile_request = request.compile
    if compile_request.compiler_path:
        sys.path.insert(0, compile_request.compiler_path)
    backend = get_backend(compile_request.backend)
    spec = compile_request.pipeline
    pipeline = PipelineSpec(name=spec.name, backend=spec.backend, passes=spec.passes, options=spec.options)
    client = ClientRequests()
    labels: list[str] = []

    @contextmanager
    def window(label: str) -> Iterator[None]:
        # Forked from a rehearsal (``_serve_rehearsed``): instrumented throughout, a window only
        # zeroes and dumps. Otherwise instrumented inside windows only: what lies between them
        # (perfguard's tracing, a backend's own steps that are not counted) runs at Valgrind's
        # uninstrumented speed, ~10x faster (a TVM compile instrumented throughout did not finish
        # its import in 10 min).
        if not _REHEARSED:
            client.start()
        client.zero()
        yield
        client.dump(label)
        if not _REHEARSED:
            client.stop()
        labels.append(label)

    tools = _CountedTools()
    token, tool_token = COUNT_WINDOW.set(window), COUNT_PROCESS.set(tools.command)
    gc.collect()
    gc.disable()
    try:
        backend.compile(Path(compile_request.model_path), pipeline, Path(compile_request.out_dir))
    except CountedCompileDone:
        pass  # the backend stopped after its last counted window
    finally:
        gc.enable()
        COUNT_WINDOW.reset(token)
        COUNT_PROCESS.reset(tool_token)
    return CountResponse(client.running(), os.getpid(), tuple(labels), tools.collect())


class _CountedTools:
    """The tools a counted compile ran as subprocesses (``backends.counting_hooks.COUNT_PROCESS``), each
    under Valgrind whole (``valgrind.tool_command``), its profile in a scratch folder; their
    events by step label (a label run twice: summed)."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.profiles: list[tuple[str, Path]] = []

    def command(self, label: str, argv: list[str]) -> list[str]:
        import tempfile
        from pathlib import Path

        from perfguard.counting.valgrind import tool_command, valgrind_path

        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="count-tools-"))
        path = self.folder / f"tool-{len(self.profiles)}.out"
        self.profiles.append((label, path))
        return tool_command(valgrind_path(), path, argv)

    def collect(self) -> dict[str, Mapping[str, int]]:
        import shutil

        from perfguard.counting.dumps import parse_dump

        events: dict[str, dict[str, int]] = {}
        try:
            for label, path in self.profiles:
                counted = parse_dump(path.read_text(errors="replace")).events  # a tool that left none: an error
                total = events.setdefault(label, {})
                for name, value in counted.items():
                    total[name] = total.get(name, 0) + value
        finally:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
        return dict(events)


CountItem = CountRequest | CountCompileRequest


@dataclass(frozen=True)
class ItemOutcome:
    """One item of a batch: the response of the child that served it, or why it has none."""

    response: CountResponse | None
    failure: str | None = None

    def to_json(self) -> JsonDict:
        if self.response is None:
            return {"failure": self.failure or "no response"}
        return {"response": self.response.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ItemOutcome:
        if "response" in data:
            return cls(CountResponse.from_json(_object(data, "response", "count item")))
        return cls(None, _str(data, "failure", "count item"))


@dataclass(frozen=True)
class CountBatchResponse:
    """Every item's outcome, in the request's order."""

    items: tuple[ItemOutcome, ...]

    def to_json(self) -> JsonDict:
        return {"items": [item.to_json() for item in self.items]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountBatchResponse:
        return cls(tuple(ItemOutcome.from_json(_mapping(item)) for item in _list(data, "items", "count batch")))


def _mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError("count batch: an item is not an object")
    return value


@dataclass(frozen=True)
class CountBatchRequest:
    """Serve every item (``count`` and ``count_compile`` requests) in one process under callgrind,
    ``parallel`` children at a time; ``imports``: the backends the process imports before its
    first child (the same list for every batch of those backends, so every child starts from the
    same state)."""

    mode: ClassVar[str] = BATCH_MODE
    #: The module the counted process runs as (``perfguard.counting.__main__``), not the worker's.
    entry: ClassVar[str] = "perfguard.counting"
    items: tuple[CountItem, ...]
    imports: tuple[str, ...]
    parallel: int = 1

    @property
    def threads(self) -> int:
        return 1

    @property
    def backends(self) -> tuple[str, ...]:
        return self.imports  # the process imports them, and each sets its thread environment

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "items": [item.to_json() for item in self.items], "imports": list(self.imports),
                "parallel": self.parallel}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountBatchRequest:
        kind = "count batch request"
        items: list[CountItem] = []
        for item in _list(data, "items", kind):
            body = _mapping(item)
            items.append(CountCompileRequest.from_json(body) if body.get("mode") == COMPILE_MODE
                         else CountRequest.from_json(body))
        return cls(tuple(items), tuple(str(i) for i in _list(data, "imports", kind)), max(1, _int(data, "parallel", kind)))

    def parse_response(self, data: Mapping[str, object]) -> CountBatchResponse:
        return CountBatchResponse.from_json(data)


def do_count_batch(request: CountBatchRequest) -> CountBatchResponse:
    """The worker side of a ``count_batch`` request: import the backends once, then fork one child
    per item (at most ``parallel`` at a time) and collect what each wrote.

    Why a child per item: Python's and the runtime's start-up under Valgrind are paid once per job
    instead of once per count (the parent imports each backend's runtime, ``Backend.preload``,
    and what the children's path imports), and yet every item starts from the same state, the
    parent's at the fork, whatever was counted before it (no allocator or cache state carried
    from one variant to the next). The parent does nothing but fork and wait until the last
    child ends (it reads their outcomes after): reading one child's outcome before forking the
    next made the next child's heap depend on which child ended first, i.e. on the load. Since
    protocol 4 it forks every child at once, keeping nothing between two forks (what the parent
    stores between two forks is part of the next child's heap), and each child waits for a turn on a pipe (``parallel`` turns, one given back per child
    that ended). The counted compiles are children of one more child, forked after the runs'
    (:func:`_serve_rehearsed`): it rehearses what every compile of the backend runs,
    instrumented, so that they find it translated instead of each translating it again
    (docs/measured.md, "Counted compiles, rehearsed").
    Callgrind follows a fork: the child writes its own profiles
    (``callgrind.out.CHILDPID.N-01``). Instructions of the calling thread and the simulated caches
    are the child's own, so children counted side by side do not disturb each other's counts.
    """
    import json
    import shutil
    import tempfile
    from pathlib import Path

    import numpy.random  # noqa: F401 - the children's feeds (make_feeds), imported once here

    import perfguard.counting.dumps  # noqa: F401 - a counted compile's tool profiles (parse_dump)
    import perfguard.counting.valgrind  # noqa: F401
    import perfguard.models.inputs  # noqa: F401
    import perfguard.runners  # noqa: F401
    from perfguard.backends import get_backend

    for name in request.imports:
        get_backend(name).preload()
    scratch = Path(tempfile.mkdtemp(prefix="count-items-"))
    count = len(request.items)
    runs = tuple(i for i, item in enumerate(request.items) if isinstance(item, CountRequest))
    compiles = tuple(i for i in range(count) if i not in runs)
    tokens = os.pipe()  # at most ``parallel`` children past their first read at a time
    os.write(tokens[1], b"t" * request.parallel)
    gc.collect()
    try:  # every child forked from one state: the parent keeps nothing between two forks
        for index in runs:
            if os.fork() == 0:  # pragma: no cover - the child: it never returns
                _serve_child(request.items[index], scratch, index, tokens[0])
        rehearsal = os.fork() if compiles else -1
        if rehearsal == 0:  # pragma: no cover - the compiles' parent: it never returns
            _serve_rehearsed(request, compiles, scratch, tokens)
        ended: dict[int, int] = {}
        for _ in range(len(runs) + (1 if compiles else 0)):
            pid, status = os.wait()
            ended[pid] = status
            if pid != rehearsal:  # the ended child's turn goes to the next, whatever its end
                os.write(tokens[1], b"t")
        ended.update(_rehearsed_statuses(scratch))
        outcomes = [_collected(_status(ended, scratch, i), scratch / f"{i}.json", json.loads) for i in range(count)]
    finally:
        os.close(tokens[0])
        os.close(tokens[1])
        shutil.rmtree(scratch, ignore_errors=True)
    return CountBatchResponse(tuple(outcomes))


#: Set in the counted compiles' parent (:func:`_serve_rehearsed`) when its backend rehearsed:
#: instrumentation stays on in every counted compile forked from it.
_REHEARSED = False
#: Where the counted compiles' parent writes how each of its children ended (pid: status).
REHEARSED_STATUSES = "compiles.status"


def _serve_rehearsed(request: CountBatchRequest, compiles: Sequence[int], scratch: Path,
                     tokens: tuple[int, int]) -> None:
    """The parent of a batch's counted compiles, itself forked from the counted process: switch
    the instrumentation on and run the backend's rehearsal (``Backend.rehearse_counted_compile``:
    fixed models compiled, nothing counted) without waiting for a turn, beside the runs' children
    rather than after them with a core idle; then fork a child per counted compile (they find the
    rehearsed code translated instead of translating it each), give each ended child's turn to the
    next, write how each ended (:data:`REHEARSED_STATUSES`) and exit. A backend with no rehearsal:
    the instrumentation is switched off again, and its compiles count as before. A rehearsal that
    fails fails the compiles, one line each (their runs are counted all the same)."""
    import json

    from perfguard.backends import get_backend
    from perfguard.backends.counting_hooks import COUNT_WINDOW
    from perfguard.counting.valgrind import ClientRequests

    global _REHEARSED
    _end_with_parent()
    client = ClientRequests()
    client.start()
    token = COUNT_WINDOW.set(_uncounted)
    failure = None
    try:
        folder = scratch / "rehearsal"
        folder.mkdir()
        backends = {request.items[i].backends[0] for i in compiles}
        _REHEARSED = all([get_backend(name).rehearse_counted_compile(folder) for name in sorted(backends)])
    except BaseException as exc:  # noqa: BLE001 - the compiles' failure, in one line
        failure = f"the counted compiles' rehearsal failed: {type(exc).__name__}: {exc}"[:500]
    finally:
        COUNT_WINDOW.reset(token)
    if not _REHEARSED:
        client.stop()
    if failure is not None:
        for index in compiles:
            (scratch / f"{index}.pid").write_text(str(os.getpid()))
            (scratch / f"{index}.json").write_text(json.dumps(ItemOutcome(None, failure).to_json()))
        os._exit(0)
    gc.collect()
    for index in compiles:
        if os.fork() == 0:
            _serve_child(request.items[index], scratch, index, tokens[0])
    ended: dict[int, int] = {}
    for _ in compiles:
        pid, status = os.wait()
        ended[pid] = status
        os.write(tokens[1], b"t")
    (scratch / REHEARSED_STATUSES).write_text(json.dumps(ended))
    os._exit(0)


@contextmanager
def _uncounted(label: str) -> Iterator[None]:
    """A counted compile's window that counts nothing (a rehearsal's)."""
    yield


def _rehearsed_statuses(scratch: Path) -> dict[int, int]:
    """How the counted compiles' children ended, by pid (none when their parent wrote nothing)."""
    import json

    try:
        found = json.loads((scratch / REHEARSED_STATUSES).read_text())
        return {int(pid): int(status) for pid, status in found.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _status(ended: Mapping[int, int], scratch: Path, index: int) -> int:
    """How the child that served item ``index`` ended (it wrote its pid first thing); a child
    that did not even do that ended by a signal as far as the parent can tell."""
    import signal

    try:
        return ended[int((scratch / f"{index}.pid").read_text())]
    except (OSError, ValueError, KeyError):
        return signal.SIGKILL


def _serve_child(item: CountItem, scratch: Path, index: int, turn: int) -> None:
    """Serve ``item`` in a forked child once a turn can be read from ``turn`` (a pipe the parent
    fills), write its outcome to ``scratch/INDEX.json`` and exit at once (no interpreter
    teardown, no flush of the parent's buffers)."""
    import json
    import traceback

    _end_with_parent()
    (scratch / f"{index}.pid").write_text(str(os.getpid()))
    os.read(turn, 1)
    path = scratch / f"{index}.json"
    code = 0
    try:
        served = do_count(item) if isinstance(item, CountRequest) else do_count_compile(item)
        outcome = ItemOutcome(served)
    except BaseException as exc:  # noqa: BLE001 - the parent reports it as this item's failure
        tail = traceback.format_exc().strip().splitlines()[-1]
        outcome = ItemOutcome(None, f"{type(exc).__name__}: {exc}"[:500] if str(exc) else tail)
    try:
        path.write_text(json.dumps(outcome.to_json()))
    except OSError:
        code = 1
    os._exit(code)


def _end_with_parent() -> None:
    """A forked child ends when the counted process does (Linux: ``PR_SET_PDEATHSIG``, which a
    fork does not inherit), not left running after a killed job."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the job's group kill still reaches it
        pass


def _collected(status: int, path: Path, parse: Callable[[str], object]) -> ItemOutcome:
    """What a child that ended with ``status`` left at ``path``."""
    if os.WIFSIGNALED(status):
        import signal

        try:
            name = signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            name = f"signal {os.WTERMSIG(status)}"
        return ItemOutcome(None, f"counted child crashed ({name})")
    try:
        data = parse(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {type(data).__name__}")
        return ItemOutcome.from_json(data)
    except (OSError, ValueError) as exc:
        return ItemOutcome(None, f"counted child exited with code {os.WEXITSTATUS(status)} without an outcome: {exc}")
