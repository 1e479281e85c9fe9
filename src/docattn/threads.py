"""How many threads torch may use, chosen before torch loads OpenMP (``docattn/__init__.py`` applies it).

Two rules, both measured by ``benchmarks/threads.py`` (``docs/scale.md``, Threads):

- waiting threads sleep (``OMP_WAIT_POLICY=PASSIVE``): OpenMP's default lets them spin, and with another
  process on the cores two threads then ran slower than one;
- one thread per core that no other process is running on now, at least one: even sleeping waiters lose to one
  thread when another process keeps a core busy.

A user's own ``OMP_NUM_THREADS`` or ``OMP_WAIT_POLICY`` is never changed.
"""

from __future__ import annotations

import os
import time

SAMPLES = 5  # reads of the kernel's count of running tasks, SAMPLE_GAP apart: the median ignores a passing one
SAMPLE_GAP = 0.002


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container or taskset limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_cores() -> int:
    """Other tasks running right now: /proc/loadavg's running count (this process included, so minus one),
    the median of a few reads; 0 where the kernel does not say."""
    counts = []
    for i in range(SAMPLES):
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        counts.append(max(running - 1, 0))
        if i + 1 < SAMPLES:
            time.sleep(SAMPLE_GAP)
    return sorted(counts)[len(counts) // 2]


def free_cores() -> int:
    """Threads for torch: the usable cores no other task is running on, at least one."""
    return max(1, usable_cores() - busy_cores())


def apply_defaults(environ=os.environ) -> None:
    """Set OpenMP's waiting policy and thread count where the user has not; must run before torch is imported."""
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "OMP_NUM_THREADS" not in environ:
        environ["OMP_NUM_THREADS"] = str(free_cores())
