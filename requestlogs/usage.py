"""Usage summaries: requests, tokens and cost by day and model, per API key or per owner, summed
by the database (exact integers, cost in nano-USD), and a stacked bar chart of them rendered on
the server as SVG (no script, no CDN: the admin page stays one HTML document).

Shown in the admin at ``/admin/requestlogs/requestlog/usage/`` (``RequestLogAdmin.usage_view``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils.html import escape

from requestlogs.models import NANO

GROUPS = {"key": ("api_key_id", "api_key_name"), "owner": ("owner_id", "owner__username")}
METRICS = {"cost": "Cost (USD)", "tokens": "Tokens (input + output)", "requests": "Requests"}
PALETTE = (
    "#417690",
    "#e07a1f",
    "#5a9e4b",
    "#b8475a",
    "#7b63b5",
    "#2b9ea5",
    "#c2a23a",
    "#8a6d55",
    "#d16fb0",
    "#6b7b8c",
)
MAX_SERIES = 9  # models beyond the largest ones are summed as "other"


@dataclass(slots=True)
class SummaryRow:
    day: date
    model: str
    group_id: int | None
    group_name: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_nano: int

    @property
    def cost(self) -> str:
        return format((Decimal(self.cost_nano) * NANO).quantize(NANO), "f")


@dataclass(slots=True)
class Summary:
    rows: list[SummaryRow] = field(default_factory=list)
    days: list[date] = field(default_factory=list)


def summarise(qs: QuerySet, group: str, since: datetime, until: datetime) -> Summary:
    """Rows of ``qs`` between ``since`` (inclusive) and ``until`` (exclusive) grouped by UTC day,
    logical model and key or owner."""
    gid, gname = GROUPS[group]
    names = (
        qs.filter(created_at__gte=since, created_at__lt=until)
        .annotate(day=TruncDate("created_at"))
        .values("day", "logical_model", gid)
        .annotate(
            requests=Count("id"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost_nano=Sum("cost_nano"),
        )
        .order_by("day", "logical_model", gid)
    )
    rows = [
        SummaryRow(
            day=r["day"],
            model=r["logical_model"] or "(none)",
            group_id=r[gid],
            group_name="",
            requests=r["requests"],
            input_tokens=int(r["input_tokens"] or 0),
            output_tokens=int(r["output_tokens"] or 0),
            cost_nano=int(r["cost_nano"] or 0),
        )
        for r in names
    ]
    labels = _group_names(group, {r.group_id for r in rows if r.group_id is not None}, qs)
    for r in rows:
        r.group_name = "(none)" if r.group_id is None else labels.get(r.group_id, f"#{r.group_id}")
    first = since.date()
    days = [
        first + timedelta(days=i) for i in range((until.date() - first).days + (1 if until.time() else 0))
    ]
    return Summary(rows=rows, days=days)


def _group_names(group: str, ids: set[int], qs: QuerySet) -> dict[int, str]:
    if not ids:
        return {}
    if group == "key":
        # The name copied at write time: a deleted key keeps its name in its rows.
        return dict(
            qs.filter(api_key_id__in=ids).order_by().values_list("api_key_id", "api_key_name").distinct()
        )
    from django.contrib.auth import get_user_model

    users = get_user_model()
    return {u.pk: u.get_username() for u in users.objects.filter(pk__in=ids)}


def _value(row: SummaryRow, metric: str) -> int:
    if metric == "cost":
        return row.cost_nano
    if metric == "tokens":
        return row.input_tokens + row.output_tokens
    return row.requests


def _label(value: int, metric: str) -> str:
    if metric == "cost":
        return format((Decimal(value) * NANO).normalize(), "f") if value else "0"
    return f"{value:,}"


def _legend(series: list[str], lx: float, top_pad: int) -> list[str]:
    out = []
    for j, name in enumerate(series):
        y = top_pad + 16 * j
        out.append(f'<rect x="{lx}" y="{y}" width="10" height="10" fill="{PALETTE[j % len(PALETTE)]}"/>')
        out.append(f'<text x="{lx + 16}" y="{y + 9}">{escape(name[:24])}</text>')
    return out


def svg_chart(summary: Summary, metric: str, *, width: int = 860, height: int = 280) -> str:
    """A stacked bar per day, one colour per model (the largest ``MAX_SERIES``, the rest as
    "other"), with a value axis and a legend. Plain SVG text, every label escaped."""
    per_model: dict[str, int] = {}
    for r in summary.rows:
        per_model[r.model] = per_model.get(r.model, 0) + _value(r, metric)
    ranked = sorted(per_model, key=lambda m: (-per_model[m], m))
    shown = ranked[:MAX_SERIES]
    series = shown + (["other"] if len(ranked) > MAX_SERIES else [])
    stacks: OrderedDict[date, dict[str, int]] = OrderedDict((d, {}) for d in summary.days)
    for r in summary.rows:
        name = r.model if r.model in shown else "other"
        stack = stacks.setdefault(r.day, {})
        stack[name] = stack.get(name, 0) + _value(r, metric)
    top = max((sum(s.values()) for s in stacks.values()), default=0)
    left, right, bottom, top_pad, legend_w = 80, 10, 40, 10, 170
    plot_w = width - left - right - legend_w
    plot_h = height - bottom - top_pad
    n = max(len(stacks), 1)
    bar_w = max(plot_w / n * 0.75, 1.0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="usage-chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(METRICS[metric])} by day and model</title>",
    ]
    for i in range(5):  # value axis: 0, 1/4 ... top
        y = top_pad + plot_h - plot_h * i / 4
        value = int(top * i / 4)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(_label(value, metric))}</text>'
        )
    label_every = max(1, n // 12)
    for i, (day, stack) in enumerate(stacks.items()):
        x = left + plot_w * i / n + (plot_w / n - bar_w) / 2
        y = top_pad + plot_h
        for j, name in enumerate(series):
            value = stack.get(name, 0)
            if not value or not top:
                continue
            h = plot_h * value / top
            y -= h
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}" data-day="{day.isoformat()}" data-model="{escape(name)}" '
                f'data-value="{value}"><title>{day.isoformat()} {escape(name)}: '
                f"{escape(_label(value, metric))}</title></rect>"
            )
        if i % label_every == 0:
            out.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle">'
                f"{day.strftime('%m-%d')}</text>"
            )
    out += _legend(series, width - legend_w + 10, top_pad)
    if not top:
        out.append(
            f'<text x="{left + plot_w / 2:.0f}" y="{top_pad + plot_h / 2:.0f}" text-anchor="middle" '
            f'fill="#888">no usage in this period</text>'
        )
    out.append("</svg>")
    return "".join(out)
