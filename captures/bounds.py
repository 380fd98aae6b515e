"""Capture bounds, enforced where the proxy collects data so memory stays bounded.

The proxy appends SSE frames to ``CaptureRecord.client_frames`` and to each attempt's
``upstream_frames``, and attempts to ``CaptureRecord.attempts``. Those containers are the
bounded lists below: past a limit they count what they drop instead of storing it, so a
runaway stream never grows a capture beyond the per-capture budget. All containers of one
capture share one :class:`Budget` (one set of counters and one byte budget, reference §3.3).

The frame count limit applies to each frame list (the client's frames, each attempt's upstream
frames) rather than to their sum: the reference records only the client's frames, and sharing
one count would let a long upstream stream starve the client-side record an auditor needs
most. Memory stays bounded by the shared byte budget.

Limits come from the ``CAPTURE_MAX_*`` knobs of ``gateway.conf`` (environment, read once per process):

=================================  ==========  ==========================================
variable                           default     meaning
=================================  ==========  ==========================================
GATEWAY_CAPTURE_MAX_ATTEMPTS       16          attempts kept per capture
GATEWAY_CAPTURE_MAX_FRAMES         4096        SSE frames kept per frame list
GATEWAY_CAPTURE_MAX_FRAME_BYTES    262144      bytes kept of one frame (cut at UTF-8 boundary)
GATEWAY_CAPTURE_MAX_BYTES          16777216    bytes of one capture's JSON (floor 8 KiB)
=================================  ==========  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    max_attempts: int = 16
    max_frames: int = 4096
    max_frame_bytes: int = 256 * 1024
    max_bytes: int = 16 * 1024 * 1024

    @classmethod
    def from_env(cls) -> Limits:
        """The bounds from the ``CAPTURE_MAX_*`` knobs (``gateway.conf``), each held to its floor."""
        from gateway.conf import gateway_settings as gs

        return cls(
            max_attempts=max(1, gs.CAPTURE_MAX_ATTEMPTS),
            max_frames=max(0, gs.CAPTURE_MAX_FRAMES),
            max_frame_bytes=max(64, gs.CAPTURE_MAX_FRAME_BYTES),
            max_bytes=max(8 * 1024, gs.CAPTURE_MAX_BYTES),
        )


LIMITS = Limits.from_env()


def utf8_len(text: str) -> int:
    """Byte length without encoding ASCII text (the common case for SSE JSON)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def cut_utf8(text: str, limit: int) -> str:
    """At most ``limit`` UTF-8 bytes of ``text``, never splitting a character."""
    if text.isascii():
        return text[:limit]
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


class Budget:
    """Counters shared by every bounded container of one capture.

    ``frame_bytes`` counts the bytes of frames kept so far; once it reaches the per-capture byte
    limit no more frames are kept (they could never be written anyway)."""

    __slots__ = (
        "limits",
        "frames",
        "frame_bytes",
        "omitted_frames",
        "omitted_bytes",
        "cut_frames",
        "omitted_attempts",
    )

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or LIMITS
        self.frames = 0
        self.frame_bytes = 0
        self.omitted_frames = 0
        self.omitted_bytes = 0
        self.cut_frames = 0
        self.omitted_attempts = 0


class BoundedFrames(list):
    """A list of SSE frame strings that keeps at most the capture's frame budget.

    ``append`` is the only mutator the proxy uses; it cuts oversized frames at a UTF-8 boundary
    and drops frames past the count or byte budget, counting both."""

    __slots__ = ("budget",)

    def __init__(self, budget: Budget, initial: list[str] | None = None) -> None:
        super().__init__()
        self.budget = budget
        for item in initial or ():
            self.append(item)

    def append(self, frame: str) -> None:  # type: ignore[override]
        b = self.budget
        lim = b.limits
        size = utf8_len(frame)
        if len(self) >= lim.max_frames or b.frame_bytes >= lim.max_bytes:
            b.omitted_frames += 1
            b.omitted_bytes += size
            return
        if size > lim.max_frame_bytes:
            frame = cut_utf8(frame, lim.max_frame_bytes)
            kept = utf8_len(frame)
            b.omitted_bytes += size - kept
            b.cut_frames += 1
            size = kept
        b.frames += 1
        b.frame_bytes += size
        super().append(frame)

    def extend(self, frames) -> None:  # type: ignore[override]
        for frame in frames:
            self.append(frame)


class EventFrames(BoundedFrames):
    """The client's frames: the proxy appends whole write chunks (several SSE events at a time
    when the upstream is fast); each event is kept as one frame (``data: ...`` without the blank
    separator line), so the frame limit counts events like the reference does."""

    __slots__ = ()

    def append(self, chunk: str) -> None:  # type: ignore[override]
        if "\n\n" not in chunk.rstrip("\n"):
            super().append(chunk.rstrip("\n"))
            return
        for block in chunk.split("\n\n"):
            if block:
                super().append(block)


class BoundedAttempts(list):
    """The attempts of one capture: at most ``max_attempts`` kept, later ones counted. Each kept
    attempt's ``upstream_frames`` is rebound to a :class:`BoundedFrames` sharing the budget."""

    __slots__ = ("budget", "seen")

    def __init__(self, budget: Budget) -> None:
        super().__init__()
        self.budget = budget
        self.seen = 0  # every attempt made, kept or not

    def append(self, attempt: Any) -> None:  # type: ignore[override]
        self.seen += 1
        if len(self) >= self.budget.limits.max_attempts:
            self.budget.omitted_attempts += 1
            # Keep the proxy's writes cheap and bounded for the attempt we do not keep.
            attempt.upstream_frames = BoundedFrames(_FULL)
            return
        if not isinstance(attempt.upstream_frames, BoundedFrames):
            attempt.upstream_frames = BoundedFrames(self.budget, attempt.upstream_frames)
        super().append(attempt)


_FULL = Budget(Limits(max_attempts=1, max_frames=0, max_frame_bytes=64, max_bytes=8 * 1024))
