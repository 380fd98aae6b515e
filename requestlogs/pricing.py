"""The cost of one request from its token counts and its channel model's price.

Token semantics follow ``gateway.urp.Usage``: ``input`` includes cache reads and writes, and
``output`` includes reasoning. So the uncached input is ``input - cache_read - cache_write``,
billed at the input price; cache reads and writes at their own prices (the input price when the
model has none); reasoning at the reasoning price (the output price when none), the rest of the
output at the output price. Prices are per million tokens; the sum is scaled by the channel
model's and the provider's multipliers and rounded half-up to a nano-dollar (the stored unit).

Exact decimal arithmetic throughout (50 significant digits: far beyond any count times any
price), never a binary float.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from math import ceil

from gateway.proxy.snapshot import ModelPrice

_CTX = Context(prec=50)
_PER_TOKEN_TO_NANO = Decimal(1000)  # (price per 10^6 tokens) * tokens / 10^6 USD = * 10^3 nano-USD


@dataclass(slots=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


def cost_nano(tokens: Tokens, price: ModelPrice) -> int:
    """The cost in nano-USD (an integer, rounded half-up)."""
    mul, add = _CTX.multiply, _CTX.add
    in_price = price.input if price.input is not None else Decimal(0)
    out_price = price.output if price.output is not None else Decimal(0)
    cache_read = min(max(tokens.cache_read, 0), max(tokens.input, 0))
    cache_write = min(max(tokens.cache_write, 0), max(tokens.input, 0) - cache_read)
    uncached = max(tokens.input - cache_read - cache_write, 0)
    reasoning = min(max(tokens.reasoning, 0), max(tokens.output, 0))
    plain_out = max(tokens.output - reasoning, 0)
    total = Decimal(0)
    total = add(total, mul(Decimal(uncached), in_price))
    total = add(total, mul(Decimal(cache_read), price.cache_read if price.cache_read is not None else in_price))
    total = add(total, mul(Decimal(cache_write), price.cache_write if price.cache_write is not None else in_price))
    total = add(total, mul(Decimal(plain_out), out_price))
    total = add(total, mul(Decimal(reasoning), price.reasoning if price.reasoning is not None else out_price))
    nano = mul(mul(total, price.multiplier), _PER_TOKEN_TO_NANO)
    return int(nano.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_CTX))


def estimate_tokens(chars: int) -> int:
    """A rough token count for text of this many characters (about four per token), used only
    when the upstream reported no usage; rows priced from it are marked ``cost_estimated``."""
    return ceil(chars / 4) if chars > 0 else 0
