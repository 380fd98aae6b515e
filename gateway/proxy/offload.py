"""Large client bodies parsed off the event loop (issue 16).

A request carrying a 4-megapixel image as base64 is a JSON body of about 5 MB. Parsing it
(``orjson.loads``, ~13 ms on the bench box) and checking its depth (``too_deep``: one
``orjson.dumps`` of the whole value, ~4 ms) ran on the event loop, in one piece each, and every
small request that arrived meanwhile waited for them: with 20 image clients the text p50 went
from 3.3 ms to 14 ms. orjson holds the GIL while it parses, so a thread would not help; the image
process pool (``gateway.images.pool``) parses instead, and the loop only waits for the result
(unpickled by the executor's own thread: a 5 MB string is a ~0.5 ms copy).

Only bodies above ``Runtime.offload_json_bytes`` that carry base64 data (every protocol's
inline image says ``base64``: data URLs, Messages' ``"type": "base64"``) go there. Below the
size the pool's round trip (pickling, a pipe, a task switch) costs more than the parse; and a
body made of many small values, like a 1 MB coding-agent history, pickles back slowly (its
unpickling on the loop's executor thread costs a third of the parse it saved, the pipe and the
pool's lowered priority the rest): sending those to the pool made the 1 MB agent requests of
``make bench`` five times slower. If the pool is broken the body is parsed here, as before: the
request must not fail because of where it was parsed.
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.images import pool as image_pool
from gateway.protocols.json_depth import loads_checked

log = logging.getLogger("gateway.proxy")


def wants_offload(raw: bytes | bytearray, threshold: int) -> bool:
    """Whether ``raw`` is large and carries base64 data, so is worth parsing on the pool
    (``threshold`` 0: never). The scan runs only past the threshold."""
    return 0 < threshold < len(raw) and raw.find(b"base64") >= 0


async def parse(raw: bytes | bytearray) -> tuple[str, Any]:
    """``loads_checked(raw)`` on the image pool; on this thread when the pool is broken."""
    try:
        return await image_pool.run(loads_checked, raw)
    except image_pool.PoolBroken as exc:
        log.warning("parsing a large body on the event loop: %s", exc)
        return loads_checked(raw)
