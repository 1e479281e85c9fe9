"""Whose files a run folder holds, and who is writing into it.

docattn never overwrites or deletes a file it did not write. A run folder lists the files docattn
wrote there in ``.docattn-files.json``; ``--overwrite`` removes exactly those (runs saved before the
list existed are recognised by their config.json and the file names docattn gives). A training in
progress holds ``.docattn.lock`` with its process id, so a second training into the same folder is
refused while the first one lives; a lock left by a process that died is taken over.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from docattn.errors import DocattnError

MANIFEST = ".docattn-files.json"
LOCK = ".docattn.lock"
# what train/fit/save and the main job write into a run folder, relative to it
RUN_FILES = (
    "config.json",
    "vocab.json",
    "model.safetensors",
    "metrics.csv",
    "checkpoints/last.ckpt",
    "baseline/model.safetensors",
    "documents.npz",
    "README.md",
)


class RunFolderError(DocattnError):
    """--out holds files docattn may not replace, or another process is training into it."""


def _read_manifest(folder: Path) -> list[str]:
    try:
        names = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _is_legacy_run(folder: Path) -> bool:
    """A run written before the manifest: its config.json is one docattn wrote."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "docattn_version" in config and "model" in config


def docattn_files(folder: Path) -> set[str]:
    """Relative paths of the files in ``folder`` that docattn wrote."""
    folder = Path(folder)
    names = set(_read_manifest(folder))
    if _is_legacy_run(folder) and not names:
        names = set(RUN_FILES)
    return {n for n in names if _inside(folder, n) and (folder / n).is_file()}


def _inside(folder: Path, name: str) -> bool:
    """A manifest entry that points outside its folder (../, an absolute path) is never touched."""
    path = (folder / name).resolve()
    return path != folder.resolve() and folder.resolve() in path.parents


def claim(folder: Path, names) -> None:
    """Record ``names`` (relative to ``folder``) as written by docattn."""
    folder = Path(folder)
    listed = _read_manifest(folder)
    merged = sorted(set(listed) | {str(n) for n in names})
    if merged == sorted(listed):
        return
    from docattn.data.files import atomic_write

    atomic_write(folder / MANIFEST, json.dumps(merged, indent=0))


def claim_in_run(path: Path) -> None:
    """A report written into a run folder is that run's: --overwrite removes it with the run it describes."""
    folder = Path(path).resolve().parent
    if (folder / MANIFEST).exists() or _is_legacy_run(folder):
        claim(folder, [Path(path).name])


def others(folder: Path) -> list[str]:
    """Files in ``folder`` docattn did not write (its own bookkeeping files aside), sorted."""
    folder = Path(folder)
    ours = docattn_files(folder) | {MANIFEST, LOCK}
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if (
            path.is_file() and rel not in ours and not (path.name.startswith(".") and ".tmp" in path.name)
        ):  # our temporaries
            found.append(rel)
    return found


def check_out(out: Path, *, resume: bool, overwrite: bool, command: str = "train") -> None:
    """Refuse, before anything is written, an --out that would lose a file: it must be new, empty, the run
    being resumed, or (with --overwrite) hold only files docattn wrote, which are then replaced."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"--out {out} is a file; give a folder to write into")
    if not out.exists():
        return
    pid = _lock_pid(out / LOCK)
    if pid is not None and pid != os.getpid() and _alive(pid):
        raise RunFolderError(f"{out} is in use: process {pid} is training into it (wait for it, or give another --out)")
    if not any(p.name not in (LOCK, MANIFEST) for p in out.iterdir()):
        return
    foreign = others(out)
    ours = sorted(docattn_files(out))
    if resume and ours:
        return
    if overwrite:
        clash = [n for n in foreign if n in RUN_FILES]
        if clash:
            raise RunFolderError(
                f"--out {out}: {', '.join(clash)} {'is' if len(clash) == 1 else 'are'} not docattn's "
                f"(no record of writing {'it' if len(clash) == 1 else 'them'}) and {command} would replace "
                f"{'it' if len(clash) == 1 else 'them'}; move {'it' if len(clash) == 1 else 'them'} away "
                "or give another --out"
            )
        return
    what = f"a docattn run ({len(ours)} file(s) docattn wrote)" if ours else "files"
    extra = (
        f"; it also holds {len(foreign)} file(s) of yours "
        f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}), never removed"
        if ours and foreign
        else ""
    )
    raise RunFolderError(
        f"--out {out} is not empty: it holds {what}{extra}. Give a new --out, --resume to continue "
        f"the run there, or --overwrite to replace the files docattn wrote"
    )


def clear(out: Path) -> list[str]:
    """Remove the files docattn wrote in ``out`` (and folders they leave empty); returns what went."""
    out = Path(out)
    removed = []
    for name in sorted(docattn_files(out)):
        (out / name).unlink(missing_ok=True)
        removed.append(name)
        parent = (out / name).parent
        while parent != out and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    (out / MANIFEST).unlink(missing_ok=True)
    return removed


class RunLock:
    """``.docattn.lock`` holding this process's id while it trains into ``folder``."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK
        self.held = False

    def __enter__(self) -> RunLock:
        for _ in range(2):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                pid = _lock_pid(self.path)
                if pid is not None and pid != os.getpid() and _alive(pid):
                    raise RunFolderError(
                        f"{self.path.parent} is in use: process {pid} is training into it "
                        "(wait for it, or give another --out)"
                    ) from None
                self.path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            except OSError as err:  # read-only, no space...: found now, before any data is read
                raise RunFolderError(
                    f"--out {self.path.parent}: cannot write there ({err.strerror}); give a folder you can write to"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self.held = True
            return self
        raise RunFolderError(f"{self.path}: cannot take the lock (another process keeps taking it)")

    def __exit__(self, *exc) -> None:
        if self.held and _lock_pid(self.path) == os.getpid():
            self.path.unlink(missing_ok=True)
        self.held = False


def _lock_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
