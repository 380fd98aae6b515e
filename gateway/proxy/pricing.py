"""The cost of one request from its token counts and its channel model's price.

Token semantics follow ``gateway.urp.Usage``: ``input`` includes cache reads and writes, and
``output`` includes reasoning. So the uncached input is ``input - cache_read - cache_write``,
billed at the input price; cache reads and writes at their own prices (the input price when the
model has none); reasoning at the reasoning price (the output price when none), the rest of the
output at the output price. Prices are per million tokens; the sum is scaled by the channel
model's and the provider's multipliers and rounded half-up to a nano-dollar (the stored unit).

Exact arithmetic throughout, never a binary float: prices (at most 12 decimals) become integers
once per snapshot, and each request's cost is integer arithmetic. The combined multiplier (the
channel model's times the provider's) is rounded to 9 decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from math import ceil
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the snapshot imports the limits, which import this module
    from .snapshot import ModelPrice

_CTX = Context(prec=50)


@dataclass(slots=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


_PRICE_SCALE = 10**12  # prices have at most 12 decimals (``providers.models``)
_MUL_SCALE = 10**9  # multipliers at most 9 decimals each; their product is rounded to 9
_ONE_NANO = 10**18  # (USD per 10^6 tokens) * 10^12 * 10^9 / 10^6 -> nano-USD (10^9)
_scaled_cache: dict[int, tuple[ModelPrice, tuple[int, int, int, int, int, int]]] = {}


def _to_int(value: Decimal, scale: int) -> int:
    return int((value * scale).to_integral_value(rounding=ROUND_HALF_UP, context=_CTX))


def _scaled(price: ModelPrice) -> tuple[int, int, int, int, int, int]:
    """The price as integers (prices times 10^12, multiplier times 10^9), computed once per
    snapshot price object: the per-request arithmetic is then plain integer arithmetic, exact
    and a few times cheaper than Decimal (measured in bench/requestlog_bench.py)."""
    hit = _scaled_cache.get(id(price))
    if hit is not None and hit[0] is price:
        return hit[1]
    inp = price.input if price.input is not None else Decimal(0)
    out = price.output if price.output is not None else Decimal(0)
    values = (
        _to_int(inp, _PRICE_SCALE),
        _to_int(out, _PRICE_SCALE),
        _to_int(price.cache_read if price.cache_read is not None else inp, _PRICE_SCALE),
        _to_int(price.cache_write if price.cache_write is not None else inp, _PRICE_SCALE),
        _to_int(price.reasoning if price.reasoning is not None else out, _PRICE_SCALE),
        _to_int(price.multiplier, _MUL_SCALE),
    )
    if len(_scaled_cache) > 4096:
        _scaled_cache.clear()
    _scaled_cache[id(price)] = (price, values)
    return values


def cost_nano(tokens: Tokens, price: ModelPrice) -> int:
    """The cost in nano-USD (an integer, rounded half-up)."""
    p_in, p_out, p_read, p_write, p_reason, mul = _scaled(price)
    inp = max(tokens.input, 0)
    cache_read = min(max(tokens.cache_read, 0), inp)
    cache_write = min(max(tokens.cache_write, 0), inp - cache_read)
    uncached = inp - cache_read - cache_write
    out = max(tokens.output, 0)
    reasoning = min(max(tokens.reasoning, 0), out)
    total = (
        uncached * p_in
        + cache_read * p_read
        + cache_write * p_write
        + (out - reasoning) * p_out
        + reasoning * p_reason
    ) * mul
    return (total + _ONE_NANO // 2) // _ONE_NANO


def estimate_tokens(chars: int) -> int:
    """A rough token count for text of this many characters (about four per token), used only
    when the upstream reported no usage; rows priced from it are marked ``cost_estimated``."""
    return ceil(chars / 4) if chars > 0 else 0
