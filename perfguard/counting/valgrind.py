"""Valgrind, found in one place: its path (:func:`valgrind_path`, a missing one is one line) and
version (:func:`valgrind_version`), the callgrind command and environment a counted worker runs
under, and the client requests that open and close its windows from Python. The profiles each
window dumps are read in ``perfguard.counting.dumps``.

Why callgrind, and why client requests: Valgrind 3.19 (Debian bookworm, every machine here) has
no start/stop requests for cachegrind (they came in 3.22), and ONNX Runtime's libraries are
stripped, so ``--toggle-collect=<function>`` finds nothing to toggle on.

Only the thread that runs the inference is counted (``--separate-threads=yes``, its profile is
``-01``): with all threads summed, the same artifact's 10-inference window read 2.76, 3.57 and
3.09 M instructions in three processes (another thread's work during the window, which depends
on timing); the calling thread alone read 2.7557-2.7571 M in four (0.05 %). Callgrind's client
requests (``CALLGRIND_START_INSTRUMENTATION``, ``ZERO_STATS``, ``DUMP_STATS_AT``) need no symbol:
a request is a fixed instruction sequence that is a no-op on a real CPU and that Valgrind's JIT
recognises. Python has no binding, so :class:`ClientRequests` writes those 28 bytes of x86-64
code (valgrind.h's ``VALGRIND_DO_CLIENT_REQUEST_EXPR``) into an executable page and calls it
through ctypes. The worker starts uninstrumented (``--instr-atstart=no``: Python's start-up and
imports run about 10x faster than instrumented), switches instrumentation on after the warm-up,
and dumps one labelled profile per window (``desc: Trigger: Client Request: LABEL``).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from perfguard.errors import UserError

#: The environment of a counted worker: every thread pool pinned to one thread and Python's hash
#: seed fixed (an unpinned OpenBLAS pool and ORT's spinning threads gave a 6 % A/A spread in the
#: first look, before windows; pinned, 0.2 %), and glibc's fastbins off: what still differed
#: between two A/A counts of one window (callgrind_annotate of both) was glibc's
#: ``malloc_consolidate``/``unlink_chunk``/``_int_malloc``, the fastbins being merged at moments
#: that depend on the heap's history (docs/measured.md, "Counted evidence").
#: A backend's own thread variables (``Backend.thread_env``, set in ``base``) are pinned with them:
#: every ``*_NUM_THREADS`` of the environment is "1" (:func:`counted_env`). So is ONNX Runtime's
#: telemetry, off (the ort backend's ``thread_env``: ``ORT_DISABLE_TELEMETRY``, read at its
#: import): its uploader thread, started at the import, opens a SQLite file and starts more threads
#: at moments the load decides, so the counted process forked its children from one of several
#: heaps and mappings, and the window's arena lookups (pointers hashed into buckets) cost what
#: those made them cost (docs/measured.md, "Exact on every model").
COUNTED_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONHASHSEED": "0", "GLIBC_TUNABLES": "glibc.malloc.mxfast=0:glibc.malloc.tcache_count=65535"}
#: The one line a counted command prints when Valgrind is not installed.
MISSING = ("--counts needs Valgrind (callgrind) on PATH: install it (Debian/Ubuntu: apt-get install valgrind; "
           "Fedora: dnf install valgrind) or run without --counts")

_CODE_X86_64 = bytes.fromhex(
    "4889f8"      # mov %rdi,%rax          the request block (6 words) goes in %rax
    "31d2"        # xor %edx,%edx          the default result: 0 (not under Valgrind)
    "48c1c703"    # rol $3,%rdi            the special preamble: four rotations that sum to 128
    "48c1c70d"    # rol $13,%rdi
    "48c1c73d"    # rol $61,%rdi
    "48c1c733"    # rol $51,%rdi
    "4887db"      # xchg %rbx,%rbx         "%rdx = client_request(%rax)"
    "4889d0"      # mov %rdx,%rax
    "c3")         # ret
#: Bytes a prepared request's stub takes in the code page (:meth:`ClientRequests.prepared`).
_STUB_SLOT = 64
_TOOL_BASE = (ord("C") << 24) | (ord("T") << 16)
RUNNING_ON_VALGRIND = 0x1001
DUMP_STATS, ZERO_STATS, TOGGLE_COLLECT, DUMP_STATS_AT, START_INSTRUMENTATION, STOP_INSTRUMENTATION = range(
    _TOOL_BASE, _TOOL_BASE + 6)


class ClientRequests:
    """Valgrind client requests from Python (x86-64 Linux only): :meth:`running` is how many
    Valgrinds the process runs under (0 natively), the others are callgrind's requests and do
    nothing natively."""

    def __init__(self) -> None:
        if platform.machine() not in ("x86_64", "AMD64"):
            raise UserError(f"--counts issues Valgrind client requests from x86-64 code; this machine is "
                            f"{platform.machine()}")
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(_CODE_X86_64)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(address)
        self._kept: list[object] = []  # the prepared requests' blocks, labels and stubs, alive with this
        self._stubs = 0

    def request(self, code: int, arg: int = 0) -> int:
        block = (ctypes.c_uint64 * 6)(code, arg, 0, 0, 0, 0)
        return int(self._call(ctypes.addressof(block)))

    def prepared(self, code: int, arg: int = 0) -> Callable[[], object]:
        """The request ``code`` built now and issued by each call of what is returned: a stub of
        its own (``movabs $block, %rdi`` before the request code) called with no argument and no
        result, so issuing it inside a window converts, allocates and frees no Python object
        (ctypes' argument and result objects cost what the heap's state makes them cost;
        docs/measured.md, "Exact on every model")."""
        block = (ctypes.c_uint64 * 6)(code, arg, 0, 0, 0, 0)
        self._kept.append(block)
        self._stubs += 1
        offset = _STUB_SLOT * self._stubs
        if offset + _STUB_SLOT > mmap.PAGESIZE:
            raise ValueError("too many prepared client requests")
        self._page.seek(offset)
        self._page.write(b"\x48\xbf" + ctypes.addressof(block).to_bytes(8, "little") + _CODE_X86_64)
        stub = ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(self._page, offset)))
        self._kept.append(stub)
        return stub

    def window(self, label: str) -> tuple[Callable[[], object], Callable[[], object]]:
        """The two requests of a window labelled ``label``, prepared: zero the counters, and
        dump them as a profile with that label."""
        text = ctypes.create_string_buffer(label.encode())
        self._kept.append(text)
        return self.prepared(ZERO_STATS), self.prepared(DUMP_STATS_AT, ctypes.addressof(text))

    def running(self) -> int:
        return self.request(RUNNING_ON_VALGRIND)

    def start(self) -> None:
        self.request(START_INSTRUMENTATION)

    def stop(self) -> None:
        self.request(STOP_INSTRUMENTATION)

    def zero(self) -> None:
        self.request(ZERO_STATS)

    def dump(self, label: str) -> None:
        text = ctypes.create_string_buffer(label.encode())
        self.request(DUMP_STATS_AT, ctypes.addressof(text))


def valgrind_path() -> str:
    """Valgrind's path, or :data:`MISSING` as a ``UserError``."""
    found = shutil.which("valgrind")
    if found is None:
        raise UserError(MISSING)
    return found


#: The longest tool string a count records (``valgrind-3.19.0``): the first line of ``valgrind
#: --version``, cut here, so a wrapper that prints megabytes does not travel in every count.
MAX_TOOL_CHARS = 64


def valgrind_version(valgrind: str) -> str:
    """``valgrind-3.19.0``: what a count records as its tool (the first line of its ``--version``,
    printable, at most :data:`MAX_TOOL_CHARS` characters; at most 4 KiB of the output is read)."""
    try:
        with subprocess.Popen([valgrind, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL) as proc:
            timer = threading.Timer(30.0, proc.kill)  # a wrapper that hangs: its pipe closes
            timer.start()
            try:
                head = proc.stdout.read(4096) if proc.stdout is not None else b""
            finally:
                timer.cancel()
                proc.kill()
    except OSError:
        return "valgrind"
    first = next(iter(head.decode(errors="replace").strip().splitlines()), "")[:MAX_TOOL_CHARS]
    return "".join(c if c.isprintable() else "?" for c in first).strip() or "valgrind"


def counted_command(valgrind: str, out_dir: Path, worker: Sequence[str], cache: bool = True) -> list[str]:
    """``worker`` under callgrind, with the cache simulation when ``cache``, uninstrumented until
    its first window, its profiles in ``out_dir``; under ``setarch -R`` (no address-space
    randomisation) where that exists, so that every process sees one layout."""
    command = [valgrind, "--tool=callgrind", "--instr-atstart=no", f"--cache-sim={'yes' if cache else 'no'}",
               "--separate-threads=yes",
               "--dump-instr=no",
               "--compress-strings=no", "--compress-pos=no",
               f"--callgrind-out-file={out_dir / 'callgrind.out.%p'}", *worker]
    setarch = shutil.which("setarch")
    if setarch is not None and platform.system() == "Linux":
        command = [setarch, platform.machine(), "-R", *command]
    return command


def tool_command(valgrind: str, out_file: Path, argv: Sequence[str]) -> list[str]:
    """``argv``, a tool a counted compile runs as a subprocess (IREE's ``iree-compile``), counted
    whole: its instructions, all threads, from exec to exit, written to ``out_file``. Cachegrind
    without its cache simulation, the cheapest tool that counts instructions exactly: one
    ``iree-compile`` of the smallest zoo ResNet took 40.5 s of CPU under it and 56.1 s under
    callgrind without cache simulation, 1.3 s natively (``benchmarks/counts_backends.py --tools``,
    docs/measured.md). The counted worker's environment (threads pinned, hash seed fixed) and its
    ``setarch -R`` are inherited."""
    return [valgrind, "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out_file}", *argv]


#: The environment variable that pads a counted worker's environment (:func:`counted_env`).
PAD_ENV = "PERFGUARD_PAD"
#: The block the strings of a counted worker's arguments and environment are padded to.
PAD_BLOCK = 4096


def counted_env(worker: Sequence[str], base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the threads pinned (:data:`COUNTED_ENV`) and padded so that the strings of
    the worker's arguments and environment fill whole 4 KiB blocks: the process's initial stack
    then starts at one alignment whatever the paths and the parent's pid (``perfguard.children``
    adds it) are. Why: a 1-character and a 61-character variable moved the same inference's count
    by up to 0.06 % (CodSpeed fixes its stack layout for the same reason)."""
    pinned = {key: "1" for key in base if key.endswith("_NUM_THREADS")}
    env = {**base, **pinned, **COUNTED_ENV}
    env["GLIBC_TUNABLES"] = merged_tunables(base.get("GLIBC_TUNABLES", ""), COUNTED_ENV["GLIBC_TUNABLES"])
    env.pop(PAD_ENV, None)
    from perfguard.children import PARENT_PID_ENV

    final = {**env, PARENT_PID_ENV: str(os.getpid())}
    size = sum(len(a.encode()) + 1 for a in worker) + sum(len(k.encode()) + len(v.encode()) + 2
                                                          for k, v in final.items())
    size += len(PAD_ENV) + 2
    env[PAD_ENV] = "x" * (-size % PAD_BLOCK)
    return env


def merged_tunables(user: str, ours: str) -> str:
    """The user's ``GLIBC_TUNABLES`` (``name=value:name=value``) with perfguard's: the user's
    tunables that perfguard does not set are kept, in their order, before perfguard's."""
    names = {item.partition("=")[0] for item in ours.split(":")}
    kept = [item for item in user.split(":") if item and item.partition("=")[0] not in names]
    return ":".join([*kept, ours])
