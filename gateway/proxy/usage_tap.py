"""What a limited request used, for settling its key's token and spend limits once the answer
is over (``limits``): a recorder riding on the request, and ``run_limited``, which puts a
non-generation endpoint under the key's limits as ``serve`` puts a generation."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.urp import Usage

from .pricing import Tokens, cost_nano
from .recorder import Recorder

if TYPE_CHECKING:
    from .limits import Limiter


class UsageTap(Recorder):
    """Remembers what a response used, for settling token and spend limits at the end: its
    usage, and the channel (its prices) and logical model that priced it."""

    __slots__ = ("usage", "channel", "logical_model")

    def __init__(self) -> None:
        self.usage: Any = None
        self.channel: Any = None
        self.logical_model = ""

    def on_request_decoded(self, call: Any) -> None:
        self.logical_model = call.logical_model

    def on_attempt_start(self, att: Any) -> None:
        self.channel = att.channel

    def on_usage(self, usage: Any) -> None:
        if usage is not None:
            self.usage = usage

    def on_response(self, resp: Any, executed: Any) -> None:
        if resp.usage is not None:
            self.usage = resp.usage

    def forwarded(self, channel: Any, logical_model: str, usage: Any) -> None:
        """A forwarded call (embeddings, compaction) was answered by ``channel``; ``usage`` is the
        answer's OpenAI-style object (``prompt_tokens``/``completion_tokens`` or
        ``input_tokens``/``output_tokens``), when it has one."""
        self.channel, self.logical_model = channel, logical_model
        if isinstance(usage, dict):
            self.usage = Usage(
                input_tokens=_count(usage, "prompt_tokens", "input_tokens"),
                output_tokens=_count(usage, "completion_tokens", "output_tokens"),
            )

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens if self.usage is not None else 0

    def cost(self) -> int:
        """The request's cost in nano-USD (0 without usage or without a price)."""
        usage, channel = self.usage, self.channel
        price = channel.prices.get(self.logical_model) if usage is not None and channel is not None else None
        if price is None:
            return 0
        return cost_nano(
            Tokens(
                input=usage.input_tokens or 0,
                output=usage.output_tokens or 0,
                cache_read=usage.cache_read_tokens or 0,
                cache_write=usage.cache_creation_tokens or 0,
                reasoning=usage.reasoning_tokens or 0,
            ),
            price,
        )


def _count(usage: dict[str, Any], *names: str) -> int:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


async def run_limited(limiter: Limiter, ex: Any, key: Any, work: Callable[[], Awaitable[None]]) -> None:
    """A non-generation endpoint (embeddings, compaction, token counts) under the key's limits,
    as ``serve`` runs a generation: admitted or refused (429/402 in the client's shape) before
    anything goes upstream, its concurrency slot freed and its usage and cost settled at the end.
    The tap rides on ``ex.recorder``, which these endpoints do not otherwise use (no capture);
    ``forward`` tells it which channel answered with what usage."""
    limits = key.limits
    if limits is None or not limits.counted:
        await work()
        return
    refused = await limiter.admit(key.id, limits, time.time())
    if refused is not None:
        await ex.send_error(refused)
        return
    tap = UsageTap()
    ex.recorder = tap
    try:
        await work()
    finally:  # after the answer's last byte; Redis is not waited for
        limiter.finish_later(key.id, limits, tap.tokens, time.time(), tap.cost() if limits.spends else 0)
