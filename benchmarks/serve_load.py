"""Load test of ``docattn serve`` on loopback: N concurrent clients for T seconds, micro-batching on and off.

    python benchmarks/serve_load.py RUN [--clients 32] [--seconds 60] [--max-requests 200000] [--batch-ms 5]
                                        [--docs-per-request 1] [--workers 1] [--model-processes N]

The server runs in its own process on 127.0.0.1 (never another address); each client sends synthetic
documents (one per request unless told) to /predict and waits for the answer before the next. Both loops
are bounded by time and by count. Throughput (documents/s), latency p50/p95/p99, errors and the CPU the server's
processes and the whole machine used (cores busy, server ms a request; Linux /proc) go to
benchmarks/results/serve_load.json with the machine and the command, beside two bounds: the model alone
(the run's predict_proba in this process, on batches of what the clients keep in flight, at the server's
threads and on every core) and the HTTP stack alone (the same clients on GET /health for 10 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

HOST = "127.0.0.1"  # loopback only: a load test targets nothing else


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(
    run: Path, port: int, batch_ms: float, torch_threads: int, workers: int, model_processes: int | None
) -> tuple[subprocess.Popen, dict]:
    """The server, once it answers /health, and that answer."""
    code = (
        f"from docattn.serve import serve; serve([{str(run)!r}], host={HOST!r}, port={port}, "
        f"micro_batch_ms={batch_ms}, torch_threads={torch_threads}, workers={workers}, "
        f"model_processes={model_processes!r})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            answer = httpx.get(f"http://{HOST}:{port}/health", timeout=1)
            if answer.status_code == 200:
                return proc, answer.json()
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not answer /health within 120 s")


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the answer by its Content-Length.

    The load clients are written on asyncio's streams: httpx's client spent about 10 ms of CPU a request
    with 32 connections, a core of the 2 the server runs on, so it measured itself rather than the server."""

    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, path: str, payload: dict | None) -> tuple[int, bytes]:
        """POST ``payload`` as JSON to ``path``; None sends a GET."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        if payload is None:
            self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n\r\n".encode())
        else:
            body = json.dumps(payload).encode()
            head = f"POST {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\nContent-Type: application/json\r\n"
            self.writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise ConnectionError("an answer without Content-Length")
        answer = await self.reader.readexactly(length)
        json.loads(answer)  # a whole JSON answer, as a client would read it
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def load(
    port: int, texts: list[str], clients: int, seconds: float, max_requests: int, per: int = 1, path: str = "/predict"
) -> dict:
    """``clients`` connections sending ``per`` documents a request to ``path`` (``/health``: a GET, no documents)."""
    latencies: list[float] = []  # one per answered request
    errors = {"count": 0, "kinds": {}}
    sent = 0
    stop = time.monotonic() + seconds

    async def client(i: int) -> None:
        nonlocal sent
        k, conn = i, Connection(port)
        while time.monotonic() < stop and sent < max_requests:
            sent += 1
            t0 = time.perf_counter()
            try:
                docs = [texts[(k * per + j) % len(texts)] for j in range(per)]
                body = None if path == "/health" else {"texts": docs} if per > 1 else {"text": docs[0]}
                status, _ = await asyncio.wait_for(conn.request(path, body), 60)
                ok, kind = status == 200, str(status)
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, asyncio.TimeoutError) as err:
                ok, kind = False, type(err).__name__
                conn.close()  # a fresh connection for the next request
            if ok:
                latencies.append(time.perf_counter() - t0)
            else:
                errors["count"] += 1
                errors["kinds"][kind] = errors["kinds"].get(kind, 0) + 1
            k += clients
        conn.close()

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(i) for i in range(clients)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    lat = np.asarray(latencies) * 1000
    return {
        "requests": sent,
        "documents": len(latencies) * per,
        "seconds": round(wall, 2),
        "docs_per_s": round(len(latencies) * per / wall, 1),
        "latency_ms": {
            q: round(float(np.percentile(lat, int(q[1:]))), 2) if len(lat) else None for q in ("p50", "p95", "p99")
        },
        "errors": errors,
        "client_cpu_ms_per_request": round(1000 * cpu / max(sent, 1), 2),
    }


def _tree_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` and its living children, from /proc (None elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    try:
        while todo:
            p = todo.pop()
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces; fields from state on
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return None
    return total


def _machine_busy_s() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat), None elsewhere."""
    try:
        cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = cpu[3] + cpu[4]  # idle, iowait
    return (sum(cpu[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def measured_load(server: subprocess.Popen, *args, **kwargs) -> dict:
    """``load(*args)``, with the CPU the server's processes and the whole machine used meanwhile: where the
    cores went, so a figure under a target says whether the machine or the waiting between turns bounds it."""
    server0, machine0, t0 = _tree_cpu_s(server.pid), _machine_busy_s(), time.perf_counter()
    result = await load(*args, **kwargs)
    server1, machine1, wall = _tree_cpu_s(server.pid), _machine_busy_s(), time.perf_counter() - t0
    if None not in (server0, server1, machine0, machine1):
        result["server_cores"] = round((server1 - server0) / wall, 2)
        result["server_cpu_ms_per_request"] = round(1000 * (server1 - server0) / max(result["requests"], 1), 3)
        result["machine_busy_cores"] = round((machine1 - machine0) / wall, 2)
    return result


def model_alone(run: Path, texts: list[str], batch: int, torch_threads: int, seconds: float = 10) -> dict:
    """The served run's own predict_proba, in this process on ``torch_threads``, on batches of what the clients
    keep in flight at once: the most a server could pass on with no HTTP and no clients beside it."""
    import torch

    from docattn.serve.runs import ServedRun

    torch.set_num_threads(torch_threads)
    served = ServedRun.load("run", run)
    served.predict_proba(texts[:batch])  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        start = done % len(texts)
        served.predict_proba((texts[start:] + texts[:start])[:batch])
        done += batch
    wall = time.perf_counter() - t0
    return {"batch": batch, "docs_per_s": round(done / wall, 1), "ms_per_batch": round(1000 * wall * batch / done, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--max-requests", type=int, default=200_000, help="stop after this many requests per mode")
    ap.add_argument("--batch-ms", type=float, default=5, help="micro-batching wait when on")
    ap.add_argument("--torch-threads", type=int, default=1, help="the server's PyTorch threads")
    ap.add_argument("--docs-per-request", type=int, default=1, help="documents in each request's body")
    ap.add_argument("--workers", type=int, default=1, help="server processes (docattn serve --workers)")
    ap.add_argument(
        "--model-processes", type=int, default=None, help="serve --model-processes (0: the server's own; default: its)"
    )
    ap.add_argument("--name", default="serve_load", help="result file name under benchmarks/results")
    args = ap.parse_args()
    if not 1 <= args.clients <= 1024 or not 0 < args.seconds <= 3600 or not 1 <= args.docs_per_request <= 256:
        raise SystemExit("--clients is 1..1024, --seconds 0..3600 and --docs-per-request 1..256")
    from docattn.data import synthetic
    from docattn.threads import usable_cores

    test = synthetic.make_splits(n_train=8, n_test=500, seed=21)["test"]
    texts = [" ".join(s) for s in test.sentences]
    batch = min(args.clients * args.docs_per_request, 256)
    # at the server's threads, and on every core (what the model could do with the machine to itself)
    alone = {n: model_alone(args.run, texts, batch, n) for n in sorted({args.torch_threads, usable_cores()})}
    print("model alone, by threads", alone, flush=True)
    modes = {}
    for mode, batch_ms in (("micro_batching_on", args.batch_ms), ("micro_batching_off", 0.0)):
        port = free_port()
        server, ready = start_server(args.run, port, batch_ms, args.torch_threads, args.workers, args.model_processes)
        try:
            modes[mode] = {
                "micro_batch_ms": batch_ms,
                **asyncio.run(
                    measured_load(
                        server, port, texts, args.clients, args.seconds, args.max_requests, args.docs_per_request
                    )
                ),
            }
            if mode == "micro_batching_on":  # the HTTP stack alone: the same clients on GET /health, 10 s
                health = asyncio.run(
                    measured_load(server, port, texts, args.clients, 10, args.max_requests, path="/health")
                )
                print("health", health, flush=True)
        finally:
            server.terminate()
            server.wait(30)
        print(mode, modes[mode], flush=True)
    write_result(
        args.name,
        {
            "run": str(args.run),
            "clients": args.clients,
            "torch_threads": args.torch_threads,
            "server_processes": args.workers,
            "model_processes": ready["model_processes"],  # per server process, as the server reports it
            "seconds_per_mode": args.seconds,
            "documents_per_request": args.docs_per_request,
            "modes": modes,
            "model_alone_by_threads": alone,
            "health_requests_per_s": health["docs_per_s"],
            "health": health,
        },
    )


if __name__ == "__main__":
    main()
