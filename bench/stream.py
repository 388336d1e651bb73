"""Chunk-to-frame latency of streamed text: our consumer against a bare Channels consumer.

Run from the repository root (see bench/README.md)::

    .venv/bin/python bench/stream.py [--concurrency 1,20] [--rounds 6] [--json]
    .venv/bin/python bench/stream.py --redis-url redis://127.0.0.1:6379/8   # + both Redis layers
    .venv/bin/python bench/stream.py --tiny                                 # seconds (CI)

For each channel layer (in-memory; with ``--redis-url`` also channels-redis' core layer and
its pub/sub layer), it migrates a scratch SQLite database and starts one Daphne
(``scripts/serving.daphne``) serving ``bench.stream_asgi:application``: the app, whose
runs all use a model that streams ``--chunks`` chunks one every ``--chunk-ms`` ms, each
chunk's text the time it was produced; and a bare Channels consumer that produces the same
chunks on the same schedule and relays each through the channel layer as its own plain
text frame. For each ``--concurrency`` C it opens C conversations over our websocket (a
session as a browser gets one, its cookie and Origin) and C bare sockets, then plays
``--rounds`` rounds, alternating which side goes first: C runs at once through ours (a
message sent, frames read until the run's final status), then C bare turns at once.

A chunk's latency is the arrival of the first frame carrying its text (``time.time()`` in
the websocket client, on this machine) minus the time written in it. For our consumer the
frames carrying text are the deltas (``data-offset``) and the whole-text snapshots; the
text they rebuild (as static/js/chat.js does) must hold every chunk of the turn, in
order, or the chunks are counted lost. Prints, per layer, concurrency and side, the chunk
latency p50 / p95 / max, the frames per turn, ours / bare for p50 and p95, and the load
average before and after. Exits 1 if the bench itself broke (a chunk lost, a run that did
not succeed, a turn that did not finish within ``--timeout-s``), not on a missed target.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.serving import daphne as serve  # noqa: E402

TARGET_P95_RATIO = 1.5  # issue 12: ours within 1.5x of the bare consumer at p95
STAMP_RE = re.compile(r"\d{9,}\.\d{6}")
DELTA_RE = re.compile(
    r'<div hx-swap-oob="beforeend:#step-(\d+)-text"(?: data-offset="(\d+)")?>(.*?)</div>', re.S
)
SNAPSHOT_RE = re.compile(
    r'<div class="turn-text streaming" id="step-(\d+)-text" hx-swap-oob="true">(.*?)</div>', re.S
)
STATUS_RE = re.compile(r'id="run-(\d+)-status" data-status="(\w+)"')
CONVERSATION_RE = re.compile(r"/c/(\d+)/$")
DONE = "done"  # the bare consumer's last frame (bench/stream_asgi.py)
LAYERS = {  # name -> the server's environment for it
    "in-memory": {},
    "redis-core": {"REDIS_CHANNEL_LAYER": "core"},
    "redis-pubsub": {"REDIS_CHANNEL_LAYER": "pubsub"},
}


class BenchBroke(RuntimeError):
    """The bench could not measure: a lost chunk, a failed run, a turn that never ended."""


@dataclass
class Turn:
    """One streamed turn as a client saw it: each chunk's latency (ms) and the frames."""

    latencies_ms: list[float] = field(default_factory=list)
    frames: int = 0


@dataclass
class Side:
    """The turns of one side (``ours`` or ``bare``) at one layer and concurrency."""

    turns: list[Turn] = field(default_factory=list)
    server_cpu_s: float = 0.0  # Daphne's CPU time during this side's rounds
    client_cpu_s: float = 0.0  # this process's CPU time during them (the websocket clients)

    def summary(self) -> dict[str, Any]:
        latencies = sorted(ms for turn in self.turns for ms in turn.latencies_ms)
        firsts = sorted(turn.latencies_ms[0] for turn in self.turns if turn.latencies_ms)
        frames = [turn.frames for turn in self.turns]
        return {
            "turns": len(self.turns),
            "chunks": len(latencies),
            "p50_ms": percentile(latencies, 50),
            "p95_ms": percentile(latencies, 95),
            "max_ms": latencies[-1] if latencies else None,
            "first_p50_ms": percentile(firsts, 50),  # a turn's first chunk: time to first token
            "first_p95_ms": percentile(firsts, 95),
            "frames_per_turn": sum(frames) / len(frames) if frames else None,
            "server_cpu_ms_per_chunk": 1000 * self.server_cpu_s / len(latencies)
            if latencies
            else None,
            "client_cpu_ms_per_chunk": 1000 * self.client_cpu_s / len(latencies)
            if latencies
            else None,
        }


def percentile(ordered: list[float], p: float) -> float | None:
    """Return the nearest-rank ``p`` percentile (0-100) of sorted ``ordered``, or None."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def stamps_of(text: str) -> list[float]:
    """Return the chunk times (Unix seconds) written in ``text``, in order."""
    return [float(stamp) for stamp in STAMP_RE.findall(text)]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def read_ours(frames: list[tuple[float, str]], chunks: int) -> Turn:
    """Return the turn our consumer's ``frames`` (arrival, frame) showed.

    Text is rebuilt as the page does: a delta is appended where its offset says, a
    snapshot replaces the text. Raises :class:`BenchBroke` if the rebuilt text does not hold
    ``chunks`` chunks (a delta lost or out of place), or a delta left a gap.
    """
    turn = Turn()
    first_seen: dict[float, float] = {}
    text = ""
    for at, frame in frames:
        carried = ""
        for _step, offset, delta in DELTA_RE.findall(frame):
            delta = html.unescape(delta)
            if offset and int(offset) != _utf16(text):
                raise BenchBroke(
                    f"a delta at offset {offset} where the text ends at {_utf16(text)}"
                )
            text += delta
            carried += delta
        for _step, whole in SNAPSHOT_RE.findall(frame):
            text = html.unescape(whole)
            carried += text
        if carried:
            turn.frames += 1
            for stamp in stamps_of(carried):
                first_seen.setdefault(stamp, at)
    got = stamps_of(text)
    if len(got) != chunks or got != sorted(got):
        raise BenchBroke(f"our frames rebuilt {len(got)} of {chunks} chunks")
    turn.latencies_ms = [(first_seen[stamp] - stamp) * 1000 for stamp in got]
    return turn


def read_bare(frames: list[tuple[float, str]], chunks: int) -> Turn:
    """Return the turn the bare consumer's ``frames`` showed (one chunk a frame)."""
    stamps = [(at, float(frame)) for at, frame in frames]
    if len(stamps) != chunks:
        raise BenchBroke(f"the bare consumer sent {len(stamps)} of {chunks} chunks")
    return Turn(latencies_ms=[(at - stamp) * 1000 for at, stamp in stamps], frames=len(stamps))


# --- the clients --------------------------------------------------------------------------


async def open_ours(base: str, timeout_s: float) -> Any:
    """Open our websocket on a new conversation, as a browser does; return the socket."""
    import httpx
    from websockets.asyncio.client import connect

    async with httpx.AsyncClient(follow_redirects=True, timeout=timeout_s) as http:
        page = await http.get(f"{base}/")
        match = CONVERSATION_RE.search(page.url.path)
        if page.status_code != 200 or not match:
            raise BenchBroke(f"GET / ended at {page.url} with HTTP {page.status_code}")
        cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
    uri = f"{base.replace('http', 'ws', 1)}/ws/chat/{match.group(1)}/"
    return await connect(uri, origin=base, additional_headers={"Cookie": cookie},
                         ping_interval=None, open_timeout=timeout_s, max_size=None)  # fmt: skip


async def open_bare(base: str, timeout_s: float) -> Any:
    """Open a socket on the bare consumer (a group of its own)."""
    from websockets.asyncio.client import connect

    uri = f"{base.replace('http', 'ws', 1)}/ws/bare/{uuid.uuid4().hex}/"
    return await connect(uri, ping_interval=None, open_timeout=timeout_s, max_size=None)


async def turn_ours(ws: Any, chunks: int) -> Turn:
    """Ask once on our socket; read until the run's final status; return the turn."""
    await ws.send(json.dumps({"content": "Stream, please."}))
    frames: list[tuple[float, str]] = []
    while True:
        frame = await ws.recv()
        frames.append((time.time(), frame))
        ended = [status for _run, status in STATUS_RE.findall(frame) if status != "running"]
        if ended:
            if ended[0] != "succeeded":
                raise BenchBroke(f"a run ended {ended[0]}")
            return read_ours(frames, chunks)


async def turn_bare(ws: Any, chunks: int) -> Turn:
    """Start the bare consumer's chunks; read until its ``done``; return the turn."""
    await ws.send("go")
    frames: list[tuple[float, str]] = []
    while (frame := await ws.recv()) != DONE:
        frames.append((time.time(), frame))
    return read_bare(frames, chunks)


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU time of process ``pid`` in seconds (``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    base: str, args: argparse.Namespace, concurrency: int, server_pid: int
) -> dict[str, Side]:
    """Play ``args.rounds`` rounds of ``concurrency`` turns a side, alternating which first.

    Each side is also charged the server's and this process's CPU time of its rounds.
    """
    sockets = {
        "ours": [await open_ours(base, args.timeout_s) for _ in range(concurrency)],
        "bare": [await open_bare(base, args.timeout_s) for _ in range(concurrency)],
    }
    play = {"ours": turn_ours, "bare": turn_bare}
    sides = {"ours": Side(), "bare": Side()}
    try:
        for round_ in range(args.rounds):
            for side in ("ours", "bare") if round_ % 2 == 0 else ("bare", "ours"):
                turns = [play[side](ws, args.chunks) for ws in sockets[side]]
                server_cpu, client_cpu = cpu_seconds(server_pid), time.process_time()
                try:
                    done = await asyncio.wait_for(asyncio.gather(*turns), args.timeout_s)
                except TimeoutError:
                    late = f"{side}: a turn did not end in {args.timeout_s:g} s"
                    raise BenchBroke(late) from None
                sides[side].turns += done
                sides[side].server_cpu_s += cpu_seconds(server_pid) - server_cpu
                sides[side].client_cpu_s += time.process_time() - client_cpu
    finally:
        for ws in sockets["ours"] + sockets["bare"]:
            await ws.close()
    return sides


# --- the servers --------------------------------------------------------------------------


def run_layer(layer: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Start a server on ``layer``, measure every concurrency; return a result per one."""
    work = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}",
           "CHAT_RUNS_PER_MINUTE": "0", "STREAM_BENCH_CHUNKS": str(args.chunks),
           "STREAM_BENCH_CHUNK_MS": str(args.chunk_ms), **LAYERS[layer]}  # fmt: skip
    env.pop("REDIS_URL", None)
    if layer != "in-memory":
        env["REDIS_URL"] = args.redis_url
    results = []
    try:
        manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
        subprocess.run(manage, cwd=ROOT, env=env, check=True)
        application = "bench.stream_asgi:application"
        with serve(env, timeout_s=60, log=work / "daphne.log", application=application) as (
            process,
            port,
        ):
            for concurrency in args.concurrency:
                load_before = os.getloadavg()
                base = f"http://127.0.0.1:{port}"
                sides = asyncio.run(measure(base, args, concurrency, process.pid))
                ours, bare = sides["ours"].summary(), sides["bare"].summary()
                results.append({
                    "layer": layer, "concurrency": concurrency, "chunks": args.chunks,
                    "chunk_ms": args.chunk_ms, "ours": ours, "bare": bare,
                    "ratio_p50": _ratio(ours["p50_ms"], bare["p50_ms"]),
                    "ratio_p95": _ratio(ours["p95_ms"], bare["p95_ms"]),
                    "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                })  # fmt: skip
                print(_line(results[-1]), file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return results


def _ratio(ours: float | None, bare: float | None) -> float | None:
    return ours / bare if ours is not None and bare else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _line(result: dict[str, Any]) -> str:
    parts = [f"{result['layer']:>12} C={result['concurrency']:<3}"]
    for side in ("ours", "bare"):
        s = result[side]
        parts.append(
            f"{side} p50/p95/max {_ms(s['p50_ms'])}/{_ms(s['p95_ms'])}/{_ms(s['max_ms'])} ms, "
            f"first p50/p95 {_ms(s['first_p50_ms'])}/{_ms(s['first_p95_ms'])} ms, "
            f"{s['frames_per_turn']:.1f} frames/turn, server CPU "
            f"{s['server_cpu_ms_per_chunk']:.2f} ms/chunk"
        )
    ratio = result["ratio_p95"]
    verdict = (
        "" if ratio is None else ("  (target met)" if ratio <= TARGET_P95_RATIO else "  (MISSED)")
    )
    parts.append(f"ours/bare p50 {result['ratio_p50'] or 0:.2f}x p95 {ratio or 0:.2f}x{verdict}")
    load = ", ".join(f"{x:.2f}" for x in result["loadavg_after"])
    parts.append(f"load {load}")
    return " | ".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100, help="chunks per turn (100)")
    parser.add_argument("--chunk-ms", type=float, default=15.0, help="ms between chunks (15)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per concurrency (6)")
    parser.add_argument("--concurrency", default="1,20",
                        help="comma-separated conversations at once per side (1,20)")  # fmt: skip
    parser.add_argument("--redis-url", default="", help="also measure both Redis layers here")
    parser.add_argument("--layers", default="",
                        help="comma-separated subset of: " + ", ".join(LAYERS))  # fmt: skip
    parser.add_argument("--timeout-s", type=float, default=120.0, help="per round (120)")
    parser.add_argument("--tiny", action="store_true", help="a few seconds: 12 chunks, C=1,3")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.tiny:
        args.chunks, args.chunk_ms, args.rounds, args.concurrency = 12, 5.0, 2, "1,3"
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if args.layers:
        args.layers = [name.strip() for name in args.layers.split(",") if name.strip()]
    else:
        args.layers = list(LAYERS) if args.redis_url else ["in-memory"]
    unknown = [name for name in args.layers if name not in LAYERS]
    if unknown:
        parser.error(f"unknown layer(s) {', '.join(unknown)}: choose from {', '.join(LAYERS)}")
    if any(name != "in-memory" for name in args.layers) and not args.redis_url:
        parser.error("the Redis layers need --redis-url")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"{args.chunks} chunks a turn, one every {args.chunk_ms:g} ms, {args.rounds} rounds; "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
          file=sys.stderr)  # fmt: skip
    results: list[dict[str, Any]] = []
    try:
        for layer in args.layers:
            results += run_layer(layer, args)
    except BenchBroke as broke:
        print(f"BENCH BROKE: {broke}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"nproc": os.cpu_count(), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
