"""Load test of ``docattn serve`` on loopback: N concurrent clients for T seconds, micro-batching on and off.

    python benchmarks/serve_load.py RUN [--clients 32] [--seconds 60] [--max-requests 200000] [--batch-ms 5]

The server runs in its own process on 127.0.0.1 (never another address); each client sends one synthetic
document per request to /predict and waits for the answer before the next. Both loops are bounded by time
and by count. Throughput (documents/s), latency p50/p95/p99 and errors go to
benchmarks/results/serve_load.json with the machine and the command.
"""

from __future__ import annotations

import argparse
import asyncio
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


def start_server(run: Path, port: int, batch_ms: float, torch_threads: int) -> subprocess.Popen:
    code = (
        f"from docattn.serve import serve; serve([{str(run)!r}], host={HOST!r}, port={port}, "
        f"micro_batch_ms={batch_ms}, torch_threads={torch_threads})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://{HOST}:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not answer /health within 120 s")


async def load(port: int, texts: list[str], clients: int, seconds: float, max_requests: int) -> dict:
    import httpx

    latencies: list[float] = []
    errors = {"count": 0, "kinds": {}}
    sent = 0
    stop = time.monotonic() + seconds

    async def client(i: int, http: httpx.AsyncClient) -> None:
        nonlocal sent
        k = i
        while time.monotonic() < stop and sent < max_requests:
            sent += 1
            t0 = time.perf_counter()
            try:
                r = await http.post("/predict", json={"text": texts[k % len(texts)]})
                ok, kind = r.status_code == 200, str(r.status_code)
            except httpx.HTTPError as err:
                ok, kind = False, type(err).__name__
            if ok:
                latencies.append(time.perf_counter() - t0)
            else:
                errors["count"] += 1
                errors["kinds"][kind] = errors["kinds"].get(kind, 0) + 1
            k += clients

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", limits=limits, timeout=60) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(i, http) for i in range(clients)))
        wall = time.perf_counter() - t0
    lat = np.asarray(latencies) * 1000
    return {
        "requests": sent,
        "documents": len(latencies),
        "seconds": round(wall, 2),
        "docs_per_s": round(len(latencies) / wall, 1),
        "latency_ms": {
            q: round(float(np.percentile(lat, int(q[1:]))), 2) if len(lat) else None for q in ("p50", "p95", "p99")
        },
        "errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--max-requests", type=int, default=200_000, help="stop after this many requests per mode")
    ap.add_argument("--batch-ms", type=float, default=5, help="micro-batching wait when on")
    ap.add_argument("--torch-threads", type=int, default=1, help="the server's PyTorch threads")
    ap.add_argument("--name", default="serve_load", help="result file name under benchmarks/results")
    args = ap.parse_args()
    if not 1 <= args.clients <= 1024 or not 0 < args.seconds <= 3600:
        raise SystemExit("--clients is 1..1024 and --seconds 0..3600")
    from docattn.data import synthetic

    test = synthetic.make_splits(n_train=8, n_test=500, seed=21)["test"]
    texts = [" ".join(s) for s in test.sentences]
    modes = {}
    for mode, batch_ms in (("micro_batching_on", args.batch_ms), ("micro_batching_off", 0.0)):
        port = free_port()
        server = start_server(args.run, port, batch_ms, args.torch_threads)
        try:
            modes[mode] = {
                "micro_batch_ms": batch_ms,
                **asyncio.run(load(port, texts, args.clients, args.seconds, args.max_requests)),
            }
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
            "seconds_per_mode": args.seconds,
            "documents_per_request": 1,
            "modes": modes,
        },
    )


if __name__ == "__main__":
    main()
