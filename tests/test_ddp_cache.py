"""Several processes, one cache (issue 36): the first process to reach a cache entry builds it under a lock and
the others wait and load it, and a 2-process CPU run launched through torchrun trains from one shared entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from cli_runs import TINY

from docattn.data import synthetic

_BUILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from docattn.data.encoding import cached

    def build(folder):
        with open(sys.argv[2], "a") as f:
            f.write("built\\n")
        time.sleep(1.5)  # long enough that the other process arrives while this one builds
        (folder / "arrays.txt").write_text("the entry")

    print(cached("key", build, sys.argv[1]))
    """
)


def test_concurrent_processes_build_an_entry_once_and_all_load_it(tmp_path):
    cache, log = tmp_path / "cache", tmp_path / "builds.txt"
    procs = [
        subprocess.Popen([sys.executable, "-c", _BUILD, str(cache), str(log)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    folders = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert log.read_text().splitlines() == ["built"]  # one build; the others waited for it
    assert folders == {str(cache / "key")} and (cache / "key" / "arrays.txt").read_text() == "the entry"
    assert sorted(p.name for p in cache.iterdir()) == ["key"]  # no lock file or half-built folder left


@pytest.mark.slow
def test_torchrun_launches_two_cpu_ranks_that_share_one_prepared_cache(tmp_path):
    splits = synthetic.make_splits(n_train=600, n_test=100, seed=2)
    for name in ("train", "test"):
        with open(tmp_path / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for text, label in zip(splits[name].texts, splits[name].labels):
                f.write(json.dumps({"text": text, "label": label}) + "\n")
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # a free port
    train = ["-m", "docattn", "train", "--train", "train.jsonl", "--test", "test.jsonl", "--out", "run"]
    ddp = ["--epochs", "2", "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", *TINY]
    res = subprocess.run([*launch, *train, *ddp], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "GLOBAL_RANK: 1" in res.stderr  # two ranks trained
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1 and entries[0].is_dir(), entries  # one entry, no second build, no lock left
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["training"]["strategy"] == "ddp" and config["results"]["test"]["documents"] == 100
