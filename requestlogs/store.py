"""Writing request-log rows: shared by the Celery task and the in-process writer.

``INSERT ... VALUES (...), (...) ON CONFLICT (request_id) DO NOTHING``, up to
``ROWS_PER_STATEMENT`` rows a statement, all of a batch in one transaction: idempotent by request
id (a batch delivered twice stores each row once), and several times cheaper in CPU than
``bulk_create`` (which builds a model instance and runs every field's ``get_db_prep_save`` per
row). Without Redis this runs in the gateway process, so its CPU is the
event loop's too. Values are adapted with the backend's own ``connection.ops`` helpers (on
SQLite the timestamp's text is built directly, the same text), so the same code writes SQLite and
PostgreSQL; the recorder's complete rows skip the column-by-column work (``_Plan``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import math
import operator
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from django.conf import settings
from django.db import connection, models, transaction

from requestlogs.models import RequestLog
from requestlogs.rowfields import ROW_FIELDS, as_dict

_COLUMNS = [f for f in RequestLog._meta.concrete_fields if not f.primary_key]


def _sqlite_json(value: Any) -> Any:
    """JSON text for SQLite with orjson (several times cheaper than ``json.dumps``; the same
    value read back), falling back to the backend's own adapter for what orjson refuses."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return connection.ops.adapt_json_value(value, None)


def _sqlite_utc(value: Any) -> str:
    """A timestamp as Django's SQLite backend stores a UTC datetime: the text of
    ``str(datetime.fromtimestamp(value, UTC).replace(tzinfo=None))`` (what
    ``adapt_datetimefield_value`` gives for a database in UTC), rounded the same way (half to
    even, to the microsecond), with the date and time part formatted once per second: building
    and printing a ``datetime`` per row was a sixth of the writer's Python work."""
    frac, whole = math.modf(float(value))
    micro = round(frac * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1.0, micro - 1_000_000
    elif micro < 0:
        whole, micro = whole - 1.0, micro + 1_000_000
    second = int(whole)
    cached = _second
    if cached[0] != second:
        cached = _second[:] = [second, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))]
    return f"{cached[1]}.{micro:06d}" if micro else cached[1]


_second: list[Any] = [None, ""]  # the last whole second formatted, and its text


def _same(value: Any) -> Any:
    return value


# address text -> what is stored for it (``_stored_ip``); a row's address is one of a few
# (the clients, a proxy), so each is parsed once, up to ``_IPS_MAX`` of them
_ips: dict[str, str | None] = {}
_IPS_MAX = 4096


def _stored_ip(value: Any) -> str | None:
    """The client address as stored, or None for text that is not an address (a proxy's
    ``unknown`` in a row spooled by an older gateway): PostgreSQL's ``inet`` column refuses
    such text, and one such row failed its whole batch (with Celery, every row of the task)."""
    if not value:
        return None
    stored = _ips.get(value, "")
    if stored != "":
        return stored
    try:
        ipaddress.ip_address(value)
        stored = value
    except ValueError:
        stored = None
    if len(_ips) >= _IPS_MAX:
        _ips.clear()
    _ips[value] = stored
    return stored


def _adapter(field: models.Field) -> Callable[[Any], Any]:
    ops = connection.ops
    if isinstance(field, models.JSONField):
        if connection.vendor == "sqlite":
            return _sqlite_json
        return lambda v: ops.adapt_json_value(v, None)
    if isinstance(field, models.DateTimeField):
        if connection.vendor == "sqlite" and settings.USE_TZ and connection.timezone_name == "UTC":
            return _sqlite_utc
        return lambda v: ops.adapt_datetimefield_value(datetime.fromtimestamp(float(v), UTC))
    if isinstance(field, models.GenericIPAddressField):
        return lambda v: ops.adapt_ipaddressfield_value(_stored_ip(v))
    return _same


def _insert_sql(columns: list[models.Field]) -> str:
    qn = connection.ops.quote_name
    cols = ", ".join(qn(f.column) for f in columns)
    marks = ", ".join(["%s"] * len(columns))
    return (
        f"INSERT INTO {qn(RequestLog._meta.db_table)} ({cols}) VALUES ({marks}) "
        f"ON CONFLICT ({qn('request_id')}) DO NOTHING"
    )


def save_rows(rows: list[Any]) -> int:
    """Insert the rows (dicts, or tuples in ``ROW_FIELDS`` order: ``RequestLogRecorder.values``)
    in one transaction, skipping request ids already stored (idempotent).
    The owner is copied from each key now, so a later change of owner does not move old rows;
    a key deleted meanwhile keeps its id and copied name. Returns how many rows were given."""
    from keys.models import ApiKey

    plan = _plan()
    key_of = plan.key_of
    key_ids = {k for r in rows if (k := key_of(r)) is not None}
    owners = dict(ApiKey.objects.filter(pk__in=key_ids).values_list("pk", "owner_id")) if key_ids else {}
    fast = plan.fast
    values = []
    for r in rows:
        owner = owners.get(key_of(r))
        try:
            values.append(fast(r, owner))
        except _Slow:
            values.append(plan.slow(as_dict(r), owner))
    with transaction.atomic():
        plan.insert(values)
    return len(rows)


class _Slow(Exception):
    """The row is not in the recorder's complete form: take the column-by-column path."""


class _Plan:
    """The INSERT statement (``owner_id`` last) and two ways to turn a row into its values.

    ``fast`` is for the recorder's rows (every column present, ``None`` only where the column is
    nullable), as its ``values`` tuple or as a dict: one ``itemgetter`` call in C picks the
    values in column order (by position from a tuple, by key from a dict) and only the few
    columns that need adapting (the timestamp, the JSON, the IP) are touched in Python. It was
    about a third of the writer's CPU per row column by column, and without Redis that CPU is
    the worker's; from the tuple there is no dict to build, look up and free per row. ``slow``
    takes any row (keys missing, ``None`` for a column with a default: rows from older spool
    files and messages, tests): adapter or default per column. All give the same values for the
    same row (tested)."""

    def __init__(self) -> None:
        cols = [f for f in _COLUMNS if f.attname != "owner_id"]
        self.sql = _insert_sql(cols + [f for f in _COLUMNS if f.attname == "owner_id"])
        self.width = len(_COLUMNS)
        fits = max(1, min(ROWS_PER_STATEMENT, _max_params() // self.width))
        self.chunk = 1 << (fits.bit_length() - 1)  # a power of two: see ``sizes``
        self.qmark = connection.vendor == "sqlite"  # SQLite: the driver's own ``?`` style
        if self.qmark:
            _bind_plain_sqlite_values()
        self.multi: dict[int, str] = {}  # rows per statement -> the statement
        self.columns = []  # per column but the owner: (row key, adapter, adapted default)
        for f in cols:
            adapt = _adapter(f)
            default = f.get_default() if f.has_default() else None
            self.columns.append((f.attname, adapt, adapt(default) if default is not None else None))
        self.pick = operator.itemgetter(*(name for name, _, _ in self.columns))
        position = {name: i for i, name in enumerate(ROW_FIELDS)}  # every column but the owner
        self.pick_values = operator.itemgetter(*(position[name] for name, _, _ in self.columns))
        self.key_position = position["api_key_id"]
        self.adapted = [
            (i, adapt, default) for i, (_, adapt, default) in enumerate(self.columns) if adapt is not _same
        ]
        # the columns where ``None`` is not what the column stores: a row with one goes slow
        defaulted = [i for i, (_, _, default) in enumerate(self.columns) if default is not None]
        self.defaulted = operator.itemgetter(*defaulted, *defaulted[:1])  # a tuple however many

    def key_of(self, r: Any) -> Any:
        """The row's ``api_key_id``."""
        return r[self.key_position] if type(r) is tuple else r.get("api_key_id")

    def fast(self, r: Any, owner: Any) -> tuple[Any, ...]:
        if type(r) is tuple:
            vals = list(self.pick_values(r))
        else:
            try:
                vals = list(self.pick(r))
            except KeyError:
                raise _Slow() from None
        if None in self.defaulted(vals):
            raise _Slow()
        for i, adapt, default in self.adapted:
            v = vals[i]
            vals[i] = adapt(v) if v is not None else default
        vals.append(owner)
        return tuple(vals)

    def insert(self, values: list[tuple[Any, ...]]) -> None:
        """Insert ``values`` with one multi-row statement per ``chunk`` rows (in the caller's
        transaction). ``executemany`` runs one statement per row, and the driver gives up the GIL
        around each step and takes it back after: with the event loop busy that was a GIL
        hand-off between the writer and the loop for every row. Measured: 2-3 µs less writer CPU
        per row and fewer context switches of the loop thread (bench/REQUESTLOGS.md)."""
        chunk = self.chunk
        flat = itertools.chain.from_iterable
        # On SQLite the driver's own cursor (Django's would rewrite every ``%s`` of the statement),
        # its errors still translated to Django's (``is_outage`` knows "database is locked" by them).
        if self.qmark:
            cursor: Any = contextlib.closing(connection.connection.cursor())
            errors: Any = connection.wrap_database_errors
        else:
            cursor, errors = connection.cursor(), contextlib.nullcontext()
        with errors, cursor as cur:
            start = 0
            for size in sizes(len(values), chunk):
                part = values[start : start + size]
                start += size
                cur.execute(self.statement(size), list(flat(part)))

    def statement(self, rows: int) -> str:
        """The INSERT for ``rows`` rows, built once per size (the driver caches the prepared
        statement by its text, so the full chunks' statement is parsed once)."""
        sql = self.multi.get(rows)
        if sql is None:
            head, _, marks = self.sql.partition(" VALUES ")
            one, _, tail = marks.partition(" ON CONFLICT ")
            if self.qmark:
                one = one.replace("%s", "?")
            sql = self.multi[rows] = f"{head} VALUES {', '.join([one] * rows)} ON CONFLICT {tail}"
        return sql

    def slow(self, r: dict[str, Any], owner: Any) -> tuple[Any, ...]:
        return (
            *(
                adapt(value) if (value := r.get(name)) is not None else default
                for name, adapt, default in self.columns
            ),
            owner,
        )


def _bind_plain_sqlite_values() -> None:
    """Registers the sqlite3 driver's adapters for ``bool`` (to ``int``) and ``None`` (to
    itself), process-wide. The driver binds an exact ``int``, ``float`` or ``str`` directly; any
    other value (a row has four booleans and usually a few ``None``) first looks for an adapter
    and, finding none, asks its protocol type for ``__adapt__``: a failed attribute lookup on a
    type, which formats an ``AttributeError`` message, about 2,000 instructions per value and a
    tenth of the writer's work per row (callgrind, bench/REQUESTLOGS.md). Found in the registry,
    the adapter is one C call. What is stored does not change: SQLite keeps a boolean as the
    integer 0 or 1 either way, and ``None`` is still NULL. ``{}.get`` is a C callable that
    answers ``None`` for ``None``."""
    sqlite3.register_adapter(bool, int)
    sqlite3.register_adapter(type(None), cast("Callable[[None], None]", {}.get))


def sizes(rows: int, chunk: int) -> list[int]:
    """Rows per statement for a batch of ``rows``: full chunks, then the rest as powers of two
    (57 -> 32, 16, 8, 1). The driver keeps every statement text it prepared (128 of them), and
    a prepared multi-row INSERT holds memory in proportion to its rows: one statement per
    remainder size kept up to 100 of them, about 20 MB per worker after a burst of uneven
    batches (bench/MEMORY.md). Now at most ``log2(chunk) + 1`` texts exist."""
    out = [chunk] * (rows // chunk)
    rest = rows % chunk
    while rest:
        size = 1 << (rest.bit_length() - 1)
        out.append(size)
        rest -= size
    return out


_plans: dict[str, _Plan] = {}

# Rows per INSERT statement: the GIL hand-offs per batch fall from one a row to one per this
# many. A fixed size, so the full chunks share one prepared statement; not tuned beyond that.
ROWS_PER_STATEMENT = 128


def _max_params() -> int:
    """Bound parameters one statement may carry: SQLite's compiled limit (32766 since 3.32; 999
    before), 65535 for PostgreSQL's protocol."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return 65535


def _plan() -> _Plan:
    """Built once per database vendor: rebuilding the statement and the adapters per batch cost
    as much as a small batch's insert."""
    vendor = connection.vendor
    found = _plans.get(vendor)
    if found is None:
        found = _plans[vendor] = _Plan()
    return found
