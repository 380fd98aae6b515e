"""Sums over a filtered set of rows, computed by the database: integer token counts and the cost
in nano-USD, both exact integer arithmetic on every backend; the cost comes back as a Decimal."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum

from requestlogs.models import NANO

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def totals(qs: QuerySet) -> dict[str, Any]:
    agg = qs.order_by().aggregate(
        requests=Count("id"), cost_nano=Sum("cost_nano"), **{name: Sum(name) for name in TOKEN_FIELDS}
    )
    out: dict[str, Any] = {"requests": agg["requests"]}
    for name in TOKEN_FIELDS:
        out[name] = int(agg[name] or 0)
    out["cost"] = Decimal(int(agg["cost_nano"] or 0)) * NANO
    return out


def cost_text(value: Decimal | None) -> str | None:
    """A cost as a plain decimal string with nine decimals (never an exponent)."""
    return None if value is None else format(value.quantize(NANO), "f")
