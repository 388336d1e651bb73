"""Relay cost of the in-memory channel layer: Channels' own against chat.layers'.

Run from the repository root::

    .venv/bin/python bench/layer.py [--sockets 200] [--messages 20000] [--tiny]

Both layers get ``--sockets`` channels, each alone in its conversation's group (as
bench/load.py's browsers are), and relay ``--messages`` fragments (a ``group_send`` of
``{"type": "run.fragment", "html": <800 characters>}`` and the ``receive`` of it, round
robin over the sockets), in alternating rounds so that both see the same load. Prints
the CPU time (``time.process_time``) per relayed message of each, their ratio and the
load average. Exits 1 if chat.layers is not faster. No Django settings needed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from channels.layers import InMemoryChannelLayer as ChannelsLayer

from chat.layers import InMemoryChannelLayer as OurLayer


async def relay_us(layer_class: type, *, sockets: int, messages: int) -> float:
    """Return the CPU µs per message relayed (group_send + receive) through a new layer."""
    layer = layer_class(capacity=1500, expiry=300)
    for n in range(sockets):
        await layer.group_add(f"conversation-{n}", f"specific.inmemory!{n}")
    message = {"type": "run.fragment", "html": "<div>" + "x" * 800 + "</div>"}
    began = time.process_time()
    for k in range(messages):
        n = k % sockets
        await layer.group_send(f"conversation-{n}", message)
        await layer.receive(f"specific.inmemory!{n}")
    return (time.process_time() - began) / messages * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=200)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each")
    parser.add_argument("--tiny", action="store_true", help="a few hundred messages (CI)")
    args = parser.parse_args()
    if args.tiny:
        args.sockets, args.messages, args.rounds = 20, 400, 1
    results: dict[str, list[float]] = {"channels": [], "chat.layers": []}
    for _ in range(args.rounds):
        for name, layer_class in (("channels", ChannelsLayer), ("chat.layers", OurLayer)):
            results[name].append(
                asyncio.run(relay_us(layer_class, sockets=args.sockets, messages=args.messages))
            )
    theirs, ours = min(results["channels"]), min(results["chat.layers"])
    print(f"{args.sockets} sockets, {args.messages:,} messages a round, {args.rounds} rounds")
    print(f"Channels' InMemoryChannelLayer  {theirs:6.1f} µs a relayed message (best round)")
    print(f"chat.layers.InMemoryChannelLayer {ours:6.1f} µs a relayed message (best round)")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"ratio {theirs / ours:.1f}x; load average {load}")
    return 0 if ours < theirs else 1


if __name__ == "__main__":
    raise SystemExit(main())
