"""Thread defaults (docattn/threads.py): sleeping OpenMP waiters, one torch thread per core no other process is
running on, and a user's own settings left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from docattn import threads


def test_a_users_settings_are_kept_and_ours_fill_the_rest(monkeypatch):
    env = {"OMP_NUM_THREADS": "3"}
    threads.apply_defaults(env)
    assert env == {"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    monkeypatch.setattr(threads, "usable_cores", lambda: 8)
    monkeypatch.setattr(threads, "busy_cores", lambda: 3)
    threads.apply_defaults(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "5"}
    monkeypatch.setattr(threads, "busy_cores", lambda: 20)
    assert threads.free_cores() == 1  # never fewer than one


def test_a_process_keeping_a_core_busy_is_counted():
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"]
    )
    try:
        time.sleep(0.5)
        seen = max(threads.busy_cores() for _ in range(5))
    finally:
        busy.kill()
        busy.wait()
    assert seen >= 1


def test_docattn_sets_them_before_torch_loads_where_the_user_has_not():
    code = "import os, docattn; print(os.environ['OMP_WAIT_POLICY'], os.environ['OMP_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    policy, count = out.split()
    assert policy == "PASSIVE" and 1 <= int(count) <= threads.usable_cores()
