"""Both sides of a profile diff as one trace file for Perfetto (ui.perfetto.dev) or
chrome://tracing, in the trace-event "JSON Object Format":
``{"traceEvents": [...], "displayTimeUnit": "ms"}``.

Each side is its own process (``pid`` 1 for the baseline, 2 for the candidate), named by a
``process_name`` metadata event (``ph: "M"``); ONNX Runtime's thread ids become ``tid`` 1, 2...
in order of appearance, named ``thread_name``; the GPU's ``Kernel`` events (``cat: "Kernel"``, ORT's
``pid``/``tid`` -1) go on one track per CUDA stream, named ``GPU stream N``. Every complete event (``ph: "X"``) keeps its
``name``, ``cat``, ``dur`` and ``args``; its ``ts`` is shifted so each side starts at 0 and the
two line up one above the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfguard.atomic import write_json_atomic

TRACE_FILE = "profile-trace.json"


# Chrome trace events (the format Perfetto reads: another tool's JSON).
def merge_traces(sides: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> dict[str, Any]:
    """One trace object from ``(process name, ORT trace events)`` per side."""
    events: list[dict[str, Any]] = []
    for index, (name, raw) in enumerate(sides, start=1):
        complete = [e for e in raw if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
        start = min((float(e["ts"]) for e in complete), default=0.0)
        threads: dict[Any, int] = {}
        events.append({"name": "process_name", "ph": "M", "pid": index, "tid": 0, "ts": 0, "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": index, "tid": 0, "ts": 0,
                       "args": {"sort_index": index}})
        for event in complete:
            tid = threads.setdefault(_track(event), len(threads) + 1)
            events.append({"name": str(event.get("name", "")), "cat": str(event.get("cat", "")), "ph": "X",
                           "ts": float(event["ts"]) - start, "dur": float(event.get("dur", 0)), "pid": index,
                           "tid": tid, "args": dict(event.get("args") or {})})
        for raw_tid, tid in threads.items():
            label = f"GPU stream {raw_tid[1]}" if isinstance(raw_tid, tuple) else f"onnxruntime thread {raw_tid}"
            events.append({"name": "thread_name", "ph": "M", "pid": index, "tid": tid, "ts": 0,
                           "args": {"name": label}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _track(event: Mapping[str, Any]) -> Any:
    """The track key of an event: its thread, or ``("stream", N)`` for a GPU kernel or copy."""
    if event.get("cat") == "Kernel":
        return ("stream", str((event.get("args") or {}).get("stream", "?")))
    return event.get("tid")


def trace_problems(data: Any) -> list[str]:
    """What keeps ``data`` from being a valid trace-event JSON object: ``traceEvents`` a list;
    every event with ``name``, ``ph``, ``pid``, ``tid`` and a numeric ``ts``; ``X`` events with a
    numeric ``dur`` >= 0; ``M`` events naming a process or thread in ``args.name``. Empty: valid."""
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems = []
    if data.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit must be ms or ns, found {data.get('displayTimeUnit')!r}")
    for index, event in enumerate(data["traceEvents"]):
        where = f"traceEvents[{index}]"
        if not isinstance(event, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [k for k in ("name", "ph", "pid", "tid", "ts") if k not in event]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        if not isinstance(event["ts"], (int, float)) or isinstance(event["ts"], bool):
            problems.append(f"{where}: ts is not a number")
        if event["ph"] == "X" and (not isinstance(event.get("dur"), (int, float)) or event["dur"] < 0):
            problems.append(f"{where}: an X event needs a duration dur >= 0")
        if event["ph"] == "M" and event["name"] in ("process_name", "thread_name") and \
                not isinstance((event.get("args") or {}).get("name"), str):
            problems.append(f"{where}: {event['name']} needs args.name")
    return problems


def write_trace(folder: str | Path, sides: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> Path:
    """Write the merged trace of ``sides`` to ``folder/profile-trace.json`` (atomically)."""
    path = Path(folder) / TRACE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, merge_traces(sides))
    return path
