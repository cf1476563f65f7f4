"""Replay the generated sample streams into Kafka, round after round (the demo's producer).

`samples/{stock,cluster,traffic}/events.jsonl` are seeded streams of
`benchmarks/generators.py` for the paper's three workloads. Each goes to its
own topic (named after the workload unless `--topic-prefix` is given); all
three share one event-time clock so that a query reading several topics sees
no event of its own late:

  1. every workload is stretched or squeezed onto the same round span
     (`--span-s`, default 200 s; the traffic sample spans about 3000 s and is
     squeezed, Linear Road reports then come every 2 s instead of 30 s);
  2. round r adds r x span to every time and r x (events of the workload) to
     every id, so windows keep advancing and ids stay unique;
  3. the rounds' events go out merged in time order at `--rate` events per
     second; `--rounds 0` replays until stopped.

    python -m greta_stream.demo.producer --bootstrap 127.0.0.1:9092 --rate 200

Imports nothing from the package but the Kafka helpers.
"""

from __future__ import annotations

import argparse
import heapq
import json
import signal
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from greta_stream.demo.broker import client_config, create_topics

WORKLOADS = ("stock", "cluster", "traffic")
KEYS = {"stock": "company", "cluster": "mapper", "traffic": "segment"}  # partition key: one key's events stay in order
DEFAULT_SAMPLES = Path(str(resources.files("greta_stream.demo") / "samples"))  # package data (a checkout links samples/ here)
Event = dict[str, Any]


def load(samples: Path, workload: str, span_s: float) -> list[Event]:
    """The workload's sample events, times scaled onto [0, span_s)."""
    lines = (samples / workload / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    last = max(e["time"] for e in events)
    scale = span_s / (last * 1.001) if last > 0 else 1.0
    for e in events:
        e["time"] = round(e["time"] * scale, 6)
    return events


def rounds(streams: dict[str, list[Event]], span_s: float, n_rounds: int) -> Iterator[tuple[str, Event]]:
    """(workload, event) of every round, merged in time order (steps 2 and 3)."""
    r = 0
    while n_rounds <= 0 or r < n_rounds:
        def shifted(w: str, evs: list[Event], r: int = r) -> Iterator[tuple[float, str, Event]]:
            for e in evs:
                t = round(e["time"] + r * span_s, 6)
                yield t, w, {**e, "time": t, "id": e["id"] + r * len(evs)}

        for _, w, e in heapq.merge(*(shifted(w, evs) for w, evs in streams.items()), key=lambda x: x[0]):
            yield w, e
        r += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    ap.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES, help="folder with <workload>/events.jsonl")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset of stock,cluster,traffic")
    ap.add_argument("--topic-prefix", default="", help="topic = prefix + workload")
    ap.add_argument("--rate", type=float, default=200.0, help="events per second (all workloads together)")
    ap.add_argument("--rounds", type=int, default=0, help="rounds to replay; 0 = until stopped")
    ap.add_argument("--span-s", type=float, default=200.0, help="event-time span of one round, seconds")
    ap.add_argument("--partitions", type=int, default=2, help="partitions of topics that this creates")
    ap.add_argument("--heartbeat", type=Path, help="touch this file while producing (container healthcheck)")
    args = ap.parse_args(argv)

    from confluent_kafka import Producer

    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    streams = {w: load(args.samples, w, args.span_s) for w in names}
    create_topics(args.bootstrap, [args.topic_prefix + w for w in names], partitions=args.partitions)
    producer = Producer(client_config(args.bootstrap, **{"enable.idempotence": True, "linger.ms": 20}))
    stop = False

    def on_signal(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started, sent = time.monotonic(), 0
    for w, e in rounds(streams, args.span_s, args.rounds):
        if stop:
            break
        ahead = sent / args.rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
        key = e.get(KEYS[w])
        while True:
            try:
                producer.produce(args.topic_prefix + w, json.dumps(e).encode(),
                                 None if key is None else str(key).encode())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        sent += 1
        if args.heartbeat and sent % 100 == 0:
            args.heartbeat.touch()
        if sent % 1000 == 0:
            print(f"producer: {sent:,} events sent, event time {e['time']:,.1f} s", file=sys.stderr, flush=True)
    producer.flush(30)
    print(f"producer: done, {sent:,} events", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
