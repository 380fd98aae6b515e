"""Loop guard (issue 13): every upstream request carries ``x-monogate-hop`` with this
deployment's id; a request that arrives carrying our own id has come back through us (a channel
pointing at the gateway itself used up 20,000 file descriptors in 8 s) and is refused with 508
Loop Detected in the client's shape. Ids of other gateways in the header are kept and passed on
(a chain of gateways is fine) up to ``MAX_HOPS``.

The id is per deployment, not per process, so a loop through another worker or instance of the
same deployment is caught too; the project derives it from ``SECRET_KEY`` (``gateway.wiring``)."""

from __future__ import annotations

from gateway.errors import ClientError

HOP_HEADER = "x-monogate-hop"
MAX_HOPS = 8
MAX_HEADER = 512


def outgoing_hop(incoming: str | None, instance_id: str) -> str:
    """The value to send upstream for a request that arrived with ``incoming``; ClientError 508
    when it already went through us (or through too many gateways)."""
    if not incoming:
        return instance_id
    hops = [h.strip() for h in incoming[:MAX_HEADER].split(",") if h.strip()]
    if instance_id in hops:
        raise ClientError(
            508,
            "loop_detected",
            "request loop detected: this request already passed through "
            "this gateway (a channel points back at it)",
            error_type="invalid_request_error",
        )
    if len(hops) >= MAX_HOPS:
        raise ClientError(
            508,
            "loop_detected",
            f"request passed through more than {MAX_HOPS} gateways",
            error_type="invalid_request_error",
        )
    return ",".join([*hops, instance_id])
