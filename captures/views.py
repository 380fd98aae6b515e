"""The capture viewer: list, detail (executed chain, stage tabs, side-by-side diffs) and raw
download. Ordinary Django views, off the hot path.

Access: login required and the ``captures.view_capture`` permission; staff see every capture,
other users only captures of their own keys. A capture that exists but is not visible gives the
same 404 as one that does not exist.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.http import urlencode

from captures import diff as jdiff
from captures import filters
from captures.models import Capture

LOGIN_URL = reverse_lazy("captures:login")
PAGE_SIZE = 50
MAX_FRAMES_SHOWN = 2000


def viewer_required(view):
    return login_required(permission_required("captures.view_capture", raise_exception=True)(view),
                          login_url=LOGIN_URL)


def find_capture(user, request_id: str) -> Capture:
    """The newest capture with this request id that ``user`` may see; 404 otherwise, whether it
    is absent or forbidden."""
    cap = Capture.objects.visible_to(user).filter(request_id=request_id).order_by("-created_at", "-id").first()
    if cap is None:
        raise Http404("capture not found")
    return cap


def load_dump(cap: Capture) -> dict[str, Any]:
    try:
        return orjson.loads(cap.dump_bytes())
    except (ValueError, orjson.JSONDecodeError) as exc:
        raise Http404("capture dump unreadable") from exc


@viewer_required
def capture_list(request: HttpRequest) -> HttpResponse:
    visible = Capture.objects.visible_to(request.user)
    try:
        qs, cleaned = filters.apply(visible.listing(), request.GET)
    except filters.InvalidFilter as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    page = Paginator(qs.order_by("-created_at", "-id"), PAGE_SIZE).get_page(request.GET.get("page"))
    from keys.models import ApiKey

    keys = ApiKey.objects.order_by("name")
    if not (request.user.is_staff or request.user.is_superuser):
        keys = keys.filter(owner_id=request.user.pk)
    return render(request, "captures/list.html", {
        "page": page, "filters": cleaned, "keys": keys.only("id", "name"), "protocols": filters.PROTOCOLS,
        "query": urlencode(cleaned), "title": "Request captures",
    })


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=repr).decode()


def _frames(frames: list[str] | None) -> dict[str, Any]:
    frames = frames or []
    return {"items": frames[:MAX_FRAMES_SHOWN], "hidden": max(0, len(frames) - MAX_FRAMES_SHOWN),
            "count": len(frames)}


def _response_tab(tab_id: str, side: str, frames: list[str] | None, body: Any) -> dict[str, Any]:
    """A response tab: the SSE frames of a stream, else the whole JSON body."""
    if frames:
        return {"id": tab_id, "title": f"{side} stream", "kind": "frames", "frames": _frames(frames)}
    return {"id": tab_id, "title": f"{side} response", "kind": "json", "body": _pretty(body)}


def _response_side(value: Any, frames: list[str] | None) -> Any:
    """A whole body, or the stream's events parsed from its frames."""
    if frames:
        return jdiff.parse_sse_frames(frames)
    return value


def visible_chain(chain: list[dict[str, Any]] | None, staff: bool) -> tuple[list[dict[str, Any]] | None, int]:
    """Staff see the whole executed chain. A key owner sees the rules of their own key's chain
    and a count of the hidden provider/global ones (reference §3.7): those belong to the
    operator, not to the key's owner."""
    if chain is None or staff:
        return chain, 0
    own = [c for c in chain if c.get("scope") == "api_key"]
    return own, len(chain) - len(own)


def build_detail(dump: dict[str, Any], selected: int | None, staff: bool = True) -> dict[str, Any]:
    attempts = dump.get("attempts") or []
    index = len(attempts) - 1 if selected is None else max(0, min(selected - 1, len(attempts) - 1))
    att = attempts[index] if attempts else {}
    stream = bool(dump.get("stream"))
    tabs = [
        {"id": "client-request", "title": "Client request", "kind": "json", "body": _pretty(dump.get("client_request"))},
        {"id": "internal-request", "title": "After request chains (URP)", "kind": "json",
         "body": _pretty(att.get("internal_request"))},
        {"id": "upstream-request", "title": "Upstream request", "kind": "json",
         "body": _pretty(att.get("upstream_request"))},
        _response_tab("upstream-response", "Upstream", att.get("upstream_frames"), att.get("upstream_response")),
        {"id": "after-chains", "title": "After response chains (URP)", "kind": "json",
         "body": _pretty(att.get("response_after_chains"))},
        _response_tab("client-response", "Client", dump.get("client_frames"), dump.get("client_response")),
    ]
    is_last = index == len(attempts) - 1
    diffs = [jdiff.side_by_side("Client request → upstream request", "Client request (as received)",
                                dump.get("client_request"), "Upstream request (as encoded)",
                                att.get("upstream_request"))]
    if is_last:
        diffs.append(jdiff.side_by_side(
            "Upstream response → client response", "Upstream response", _response_side(
                att.get("upstream_response"), att.get("upstream_frames")),
            "Client response", _response_side(dump.get("client_response"), dump.get("client_frames"))))
    for n, d in enumerate(diffs):
        tabs.append({"id": f"diff-{n}", "title": d.title, "kind": "diff", "diff": d})
    chain, hidden = visible_chain(att.get("executed_chain"), staff)
    return {
        "hidden_transforms": hidden,
        "attempts": attempts, "attempt": att, "attempt_index": index + 1, "tabs": tabs,
        "chain": chain, "stream": stream, "truncation": dump.get("capture_truncation") or {},
    }


@viewer_required
def capture_detail(request: HttpRequest, request_id: str) -> HttpResponse:
    cap = find_capture(request.user, request_id)
    dump = load_dump(cap)
    selected = request.GET.get("attempt")
    staff = request.user.is_staff or request.user.is_superuser
    context = build_detail(dump, int(selected) if selected and selected.isdigit() else None, staff)
    context.update({"capture": cap, "dump": dump, "title": f"Capture {cap.request_id}"})
    return render(request, "captures/detail.html", context)


@viewer_required
def capture_raw(request: HttpRequest, request_id: str) -> HttpResponse:
    cap = find_capture(request.user, request_id)
    data = cap.dump_bytes()
    if not (request.user.is_staff or request.user.is_superuser):
        doc = load_dump(cap)  # the same chain redaction as the page
        for att in doc.get("attempts") or []:
            att["executed_chain"], att["hidden_transforms"] = visible_chain(att.get("executed_chain"), False)
        data = orjson.dumps(doc)
    response = HttpResponse(data, content_type="application/json")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in cap.request_id[:64])
    response["Content-Disposition"] = f'attachment; filename="capture-{safe}.json"'
    response["Cache-Control"] = "no-store"
    return response
