"""A minimal Redis connection for the per-key limiter's two scripts (issue 17).

redis-py's asyncio client spent about 0.15 ms of CPU per ``EVALSHA`` here (pool checkout, a
health read before each command, its generic encoder and parser): two calls per limited request
were most of what limits added to a request (bench/LIMITS_REDIS.md). This speaks RESP2 on one
dedicated connection, with commands pipelined (written at once; replies matched in order), and
``send`` writes synchronously: the admission can be on the wire before the request is decoded
and its reply awaited only before anything goes upstream (``admission.Admission``), which first
tries to read it at once (``poll``: by then it has usually arrived, and the request goes on
without a turn of the event loop).

Only what the limiter needs: TCP or a Unix socket, ``AUTH`` and ``SELECT``, a per-command
timeout (the client's ``socket_timeout``), reconnection on the next call. A client it cannot
mirror (TLS, a custom connection class) gets ``None`` from ``RedisPipe.of``, and the limiter
keeps using redis-py.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from typing import Any

from . import redis_errors

INCOMPLETE = object()
# How long a command sent with ``later`` (the end of a request: freeing its slot, settling its
# tokens) may wait for the next command to share its write. A system call costs about 60 us of
# CPU on the sandboxed kernels this runs on (bench/LIMITS_REDIS.md); the next request's admission
# usually comes sooner and carries it.
HOLD = 0.002


def encode(args: tuple[Any, ...], count: int | None = None) -> bytes:
    """One command in RESP (an array of bulk strings); ``count``: the array's length when more
    arguments will follow these."""
    out = [b"*%d\r\n" % (len(args) if count is None else count)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def encode_ints(values: tuple[int, ...]) -> bytes:
    """Integer arguments as RESP bulk strings, to follow a kept ``encode``d prefix (whose array
    length counts them)."""
    out = []
    for value in values:
        text = b"%d" % value
        out.append(b"$%d\r\n%b\r\n" % (len(text), text))
    return b"".join(out)


def _error(line: bytes) -> redis_errors.ResponseError:
    text = line.decode(errors="replace")
    return (
        redis_errors.NoScriptError(text) if text.startswith("NOSCRIPT") else redis_errors.ResponseError(text)
    )


def parse(buf: bytearray, pos: int) -> Any:
    """One RESP2 reply at ``pos``: ``(value, next position)``, or ``INCOMPLETE``. An error
    reply is its exception (``NoScriptError`` for ``NOSCRIPT``), returned, not raised."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return INCOMPLETE
    kind, line, nxt = buf[pos], bytes(buf[pos + 1 : end]), end + 2
    if kind == 58:  # ':' integer
        return int(line), nxt
    if kind == 43:  # '+' simple string
        return line, nxt
    if kind == 45:  # '-' error
        return _error(line), nxt
    if kind == 36:  # '$' bulk string
        size = int(line)
        if size < 0:
            return None, nxt
        if len(buf) < nxt + size + 2:
            return INCOMPLETE
        return bytes(buf[nxt : nxt + size]), nxt + size + 2
    if kind == 42:  # '*' array
        count = int(line)
        if count < 0:
            return None, nxt
        items = []
        for _ in range(count):
            got = parse(buf, nxt)
            if got is INCOMPLETE:
                return INCOMPLETE
            value, nxt = got
            items.append(value)
        return items, nxt
    raise redis_errors.RedisConnectionError(f"unexpected reply type {chr(kind)!r} from Redis")


class _Conn:
    """One connection: a non-blocking socket read by the loop (``add_reader``) or, when a caller
    wants a reply that may already have arrived, at once (``poll``: one ``recv``, no loop
    iteration), the commands in flight (each with its timeout timer) and the unparsed bytes. A
    new connection is a new ``_Conn``: a closed one cannot fail its successor's commands."""

    def __init__(self, sock: socket.socket, timeout: float | None) -> None:
        self.sock = sock
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.waiters: deque[tuple[asyncio.Future[Any], asyncio.TimerHandle | None]] = deque()
        self.buf = bytearray()
        self.out = bytearray()  # bytes the socket did not take yet (written when writable)
        self.held: list[bytes] = []  # commands not yet written (``send(later=True)``)
        self.flusher: asyncio.TimerHandle | None = None
        self.loop.add_reader(sock.fileno(), self.poll)

    def poll(self) -> None:
        """Read what the socket has (without waiting) and answer the commands it completes."""
        if self.closed:
            return
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(redis_errors.RedisConnectionError(f"Redis connection lost: {exc!r}"))
            return
        if not data:
            self.close(redis_errors.RedisConnectionError("Redis closed the connection"))
            return
        self._received(data)

    def _received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        waiters = self.waiters
        try:
            while waiters:
                got = parse(buf, pos)
                if got is INCOMPLETE:
                    break
                value, pos = got
                fut, timer = waiters.popleft()
                if timer is not None:
                    timer.cancel()
                if not fut.done():  # a caller that was cancelled does not want its reply
                    if isinstance(value, redis_errors.ResponseError):
                        fut.set_exception(value)
                    else:
                        fut.set_result(value)
        except Exception as exc:  # a reply we cannot read: nothing after it can be matched
            self.close(exc)
            return
        if pos:
            del buf[:pos]

    def send(self, data: bytes, later: bool = False) -> asyncio.Future[Any]:
        """Write the command (``encode``d) now, with any held before it, or (``later``) hold it
        until the next command written now or ``HOLD`` seconds, whichever comes first."""
        loop = self.loop
        fut = loop.create_future()
        if self.closed:
            fut.set_exception(redis_errors.RedisConnectionError("Redis connection closed"))
            return fut
        timer = loop.call_later(self.timeout, self._timed_out, fut) if self.timeout else None
        self.waiters.append((fut, timer))
        if later:
            self.held.append(data)
            if self.flusher is None:
                self.flusher = loop.call_later(HOLD, self.flush)
            return fut
        if self.held:
            self.held.append(data)
            self.flush()
        else:
            self._write(data)
        return fut

    def flush(self) -> None:
        """Write the held commands (one write: one system call for all of them)."""
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        held, self.held = self.held, []
        if held and not self.closed:
            self._write(b"".join(held))

    def _write(self, data: bytes) -> None:
        if self.out:  # the socket is still busy with earlier bytes: keep the order
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self.close(redis_errors.RedisConnectionError(f"Redis connection lost: {exc!r}"))
            return
        if sent < len(data):
            self.out += data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(redis_errors.RedisConnectionError(f"Redis connection lost: {exc!r}"))
            return
        del self.out[:sent]
        if not self.out:
            self.loop.remove_writer(self.sock.fileno())

    def close(self, exc: Exception) -> None:
        if not self.closed:
            self.closed = True
            fd = self.sock.fileno()
            if fd >= 0:
                self.loop.remove_reader(fd)
                self.loop.remove_writer(fd)
            self.sock.close()
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        self.held = []
        self.fail(exc)

    def _timed_out(self, fut: asyncio.Future[Any]) -> None:
        if not fut.done():
            self.close(redis_errors.RedisTimeoutError("Redis did not answer in time"))

    def fail(self, exc: Exception) -> None:
        waiters, self.waiters = self.waiters, deque()
        for fut, timer in waiters:
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(exc)


class RedisPipe:
    """One pipelined connection: ``send`` writes a command now and returns the future of its
    reply; ``call`` connects first when needed. A timeout or a lost connection fails every
    command in flight (their replies could no longer be matched) and closes the connection; the
    next ``call`` opens a new one."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 6379,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self.host, self.port, self.path, self.db = host, port, path, int(db or 0)
        self.username, self.password = username, password
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.conn: _Conn | None = None
        self.connecting: asyncio.Lock | None = None

    @classmethod
    def of(cls, client: Any) -> RedisPipe | None:
        """A pipe to the server a redis-py asyncio client talks to, with its credentials and
        timeouts; None for what this does not speak (TLS, custom connection classes)."""
        from redis.asyncio.connection import Connection, UnixDomainSocketConnection

        pool = getattr(client, "connection_pool", None)
        if pool is None or pool.connection_class not in (Connection, UnixDomainSocketConnection):
            return None
        kw = pool.connection_kwargs
        return cls(
            host=kw.get("host", "127.0.0.1"),
            port=int(kw.get("port", 6379)),
            path=kw.get("path") if pool.connection_class is UnixDomainSocketConnection else None,
            db=kw.get("db", 0),
            username=kw.get("username"),
            password=kw.get("password"),
            timeout=kw.get("socket_timeout"),
            connect_timeout=kw.get("socket_connect_timeout") or kw.get("socket_timeout"),
        )

    @property
    def ready(self) -> bool:
        conn = self.conn
        return conn is not None and not conn.closed

    def send(self, *args: Any) -> asyncio.Future[Any]:
        """Write one command now (the pipe must be ``ready``); the future of its reply."""
        assert self.conn is not None
        return self.conn.send(encode(args))

    def send_encoded(self, data: bytes) -> asyncio.Future[Any]:
        """``send`` of a command already in RESP (``encode``), e.g. kept from an earlier call."""
        assert self.conn is not None
        return self.conn.send(data)

    def send_later(self, data: bytes) -> asyncio.Future[Any]:
        """``send_encoded``, but the command may wait up to ``HOLD`` seconds for company."""
        assert self.conn is not None
        return self.conn.send(data, later=True)

    def flush(self) -> None:
        if self.conn is not None:
            self.conn.flush()

    async def call(self, *args: Any) -> Any:
        if not self.ready:
            await self.connect()
        return await self.send(*args)

    async def connect(self) -> None:
        """Open a connection (once, however many callers ask at the same time)."""
        if self.connecting is None:
            self.connecting = asyncio.Lock()
        async with self.connecting:
            if self.ready:
                return
            try:
                sock = await asyncio.wait_for(self._open(), self.connect_timeout)
            except TimeoutError:
                raise redis_errors.RedisTimeoutError("timed out connecting to Redis") from None
            except OSError as exc:
                raise redis_errors.RedisConnectionError(f"cannot connect to Redis: {exc!r}") from exc
            conn = _Conn(sock, self.timeout)
            hello = []
            if self.password:
                auth = ("AUTH", self.username, self.password) if self.username else ("AUTH", self.password)
                hello.append(conn.send(encode(auth)))
            if self.db:
                hello.append(conn.send(encode(("SELECT", self.db))))
            try:
                for reply in hello:
                    await reply
            except Exception as exc:
                conn.close(exc)
                raise
            self.conn = conn

    async def _open(self) -> socket.socket:
        """A connected non-blocking socket (TCP without Nagle's delay, or Unix)."""
        loop = asyncio.get_running_loop()
        if self.path:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            address: Any = self.path
        else:
            infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, address = infos[0]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return sock

    def poll(self) -> None:
        """Read a reply that may have arrived, now rather than on the loop's next turn."""
        if self.conn is not None:
            self.conn.poll()

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close(redis_errors.RedisConnectionError("Redis connection closed"))
