"""Micro-benchmark: what a reasoning stream rule costs per event when it does not match the
request's model (it should cost nothing: the chain is selected once per request, so a
non-matching rule never sees an event), against no rule and against a matching rule.

A 200-event reasoning stream (plaintext reasoning deltas, then text deltas, with starts, dones
and the terminal event) goes through ``StreamChain.process`` for each case; µs per event is the
median over several runs. Not a test (tests never assert on time); run on an idle machine::

    .venv/bin/python bench/reasoning_stream_rules.py [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from copy import deepcopy
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages


def build_events(n: int = 200) -> list:
    from gateway.urp import ReasoningNode, TextNode
    from gateway.urp import events as ev

    half = n // 2
    out: list = [ev.ResponseStart(id="r", model="m"), ev.NodeStart(index=0, node=ReasoningNode())]
    out += [ev.NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="thinking ") for _ in range(half)]
    out += [
        ev.NodeDone(index=0, node=ReasoningNode(content="thinking " * half)),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
    ]
    out += [ev.NodeDelta(index=1, kind=ev.TEXT, delta="word ") for _ in range(half)]
    done_text = TextNode(role="assistant", content="word " * half)
    out += [
        ev.NodeDone(index=1, node=done_text),
        ev.ResponseDone(output=[ReasoningNode(content="thinking " * half), done_text]),
    ]
    return out


def per_event_us(rules: list, events: list, runs: int) -> float:
    from gateway.proxy.chain import StreamChain, select
    from transforms.base import TransformContext

    samples = []
    for _ in range(runs):
        batch = [deepcopy(events) for _ in range(20)]
        start = time.perf_counter()
        for evs in batch:
            ctx = TransformContext(logical_model="gpt-5", client_protocol="responses", stream=True)
            chain = StreamChain(select([tuple(rules), (), ()], "response", "gpt-5"), ctx)
            for event in evs:
                chain.process(event)
        samples.append((time.perf_counter() - start) / (20 * len(events)) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    from gateway.proxy.chain import CompiledRule
    from transforms.registry import registry

    events = build_events()
    cls = registry()["reasoning_to_think_xml"]
    non_matching = CompiledRule(1, "provider", "response", ("claude-*",), cls({"tag": "think"}))
    matching = CompiledRule(1, "provider", "response", ("gpt-*",), cls({"tag": "think"}))
    rows = [
        ("no rule", []),
        ("non-matching reasoning_to_think_xml", [non_matching]),
        ("matching reasoning_to_think_xml", [matching]),
    ]
    print("| case | µs per event |\n| --- | --- |")
    for label, rules in rows:
        print(f"| {label} | {per_event_us(rules, events, args.runs):.3f} |")


if __name__ == "__main__":
    main()
