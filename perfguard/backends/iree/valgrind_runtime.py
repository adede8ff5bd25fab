"""IREE's runtime under Valgrind (``--counts``): keep it off io_uring, and say which modules
cannot be counted.

IREE 3.13's runtime starts a proactor thread on io_uring when ``iree.runtime`` is imported.
Under Valgrind 3.19 that thread blocks in ``io_uring_enter`` holding Valgrind's one lock, and
the process hangs for good (seen here: ``import iree.runtime`` under ``valgrind --tool=none``
slept for 12 minutes, its threads in ``anon_pipe_read`` and ``io_cqring_wait``). IREE falls
back to its POSIX proactor where ``io_uring_setup`` fails (EPERM: "blocked by security
policy"), so a process under Valgrind installs a seccomp filter that fails that one system call
before it imports the runtime; natively nothing is installed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

#: x86-64's ``io_uring_setup`` system call number and audit architecture.
IO_URING_SETUP = 425
_AUDIT_ARCH_X86_64 = 0xC000003E
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_ALLOW, _ERRNO_EPERM = 0x7FFF0000, 0x00050000 | 1
_installed = False


def under_valgrind() -> bool:
    """Whether this process runs under Valgrind (its preload library is in ``LD_PRELOAD``)."""
    return "vgpreload" in os.environ.get("LD_PRELOAD", "")


def filter_program() -> bytes:
    """The classic-BPF seccomp program: on x86-64, ``io_uring_setup`` fails with EPERM; every
    other call (and every call of another architecture) is allowed."""
    insns = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64), (_RET_K, 0, 0, _ALLOW),
             (_LD_W_ABS, 0, 0, 0), (_JEQ_K, 0, 1, IO_URING_SETUP), (_RET_K, 0, 0, _ERRNO_EPERM),
             (_RET_K, 0, 0, _ALLOW)]
    return b"".join(struct.pack("HBBI", *insn) for insn in insns)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def keep_off_io_uring() -> None:
    """Under Valgrind on x86-64 Linux, fail ``io_uring_setup`` for the rest of the process (see
    the module); elsewhere, and a second time, nothing."""
    global _installed
    if _installed or not under_valgrind() or platform.system() != "Linux" or platform.machine() != "x86_64":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(filter_program())
    program = _Program(len(code.raw) // 8, ctypes.addressof(code))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot keep IREE's runtime off io_uring under Valgrind (seccomp)")
    _installed = True


def host_has_avx512() -> bool:
    """Whether this machine's CPU has AVX-512 (``/proc/cpuinfo``'s flags; False where unreadable)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            return any(line.startswith("flags") and " avx512f" in line for line in cpuinfo)
    except OSError:
        return False


def count_blocker(settings: dict[str, object]) -> str | None:
    """Why a module with runtime ``settings`` cannot be counted, in one line; None when it can."""
    if settings.get("target") not in ("llvm-cpu", "vmvx"):
        return f"IREE target {settings.get('target')!r} does not run on the CPU Valgrind simulates"
    if settings.get("driver") != "local-sync":
        return (f"IREE driver {settings.get('driver')!r} runs dispatches on its worker threads, which a window "
                "of the calling thread does not count: count with driver = \"local-sync\"")
    if settings.get("target") == "llvm-cpu" and settings.get("target_cpu", "host") == "host" and host_has_avx512():
        return ("the module is built for this CPU (target_cpu = \"host\"), which has AVX-512, and Valgrind cannot run "
                "AVX-512 instructions: pin an AVX2 CPU to count it (target_cpu = \"haswell\")")
    return None
