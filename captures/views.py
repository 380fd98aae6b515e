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
from captures.assemble import assemble
from captures.models import Capture
from captures.steps import admin_urls, chips

LOGIN_URL = reverse_lazy("captures:login")
PAGE_SIZE = 50
MAX_FRAMES_SHOWN = 2000


def viewer_required(view):
    return login_required(
        permission_required("captures.view_capture", raise_exception=True)(view), login_url=LOGIN_URL
    )


def find_capture(user, request_id: str) -> Capture:
    """The newest capture with this request id that ``user`` may see; 404 otherwise, whether it
    is absent or forbidden."""
    cap = (
        Capture.objects.visible_to(user).filter(request_id=request_id).order_by("-created_at", "-id").first()
    )
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
    return render(
        request,
        "captures/list.html",
        {
            "page": page,
            "filters": cleaned,
            "keys": keys.only("id", "name"),
            "protocols": filters.PROTOCOLS,
            "query": urlencode(cleaned),
            "title": "Request captures",
        },
    )


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=repr).decode()


def _frames(frames: list[str] | None) -> dict[str, Any]:
    frames = frames or []
    return {
        "items": frames[:MAX_FRAMES_SHOWN],
        "hidden": max(0, len(frames) - MAX_FRAMES_SHOWN),
        "count": len(frames),
    }


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


def _urp_response_diff(dump: dict[str, Any], att: dict[str, Any]) -> jdiff.SideBySide | None:
    """The answer before and after the response chains, in the URP: for a stream, both sides
    assembled from their frames (the upstream's by the upstream codec, the client's by the
    client codec), so protocols compare as whole answers rather than frame by frame."""
    if att.get("upstream_frames") or dump.get("client_frames"):
        before = assemble(att.get("upstream_protocol") or "", att.get("upstream_frames"), recorded=True)
        after = assemble(dump.get("client_protocol") or "", dump.get("client_frames"), recorded=False)
        if before is None and after is None:
            return None
        return jdiff.side_by_side(
            "Assembled answers (URP): upstream → client",
            "Upstream stream, assembled",
            before,
            "Client stream, assembled",
            after,
        )
    run = (att.get("rule_steps") or {}).get("response")
    if not run or not run.get("steps") or att.get("response_after_chains") is None:
        return None  # no response rule ran: nothing to compare
    return jdiff.side_by_side(
        "Response chains (URP): before → after",
        "Before the response rules",
        run.get("before"),
        "After the response rules",
        att.get("response_after_chains"),
    )


def visible_chain(chain: list[dict[str, Any]] | None, staff: bool) -> tuple[list[dict[str, Any]] | None, int]:
    """Staff see the whole executed chain. A key owner sees the rules of their own key's chain
    and a count of the hidden provider/global ones (reference §3.7): those belong to the
    operator, not to the key's owner."""
    if chain is None or staff:
        return chain, 0
    own = [c for c in chain if c.get("scope") == "api_key"]
    return own, len(chain) - len(own)


def _diffs(dump: dict[str, Any], att: dict[str, Any], is_last: bool) -> list[jdiff.SideBySide]:
    """The side-by-side diffs: client -> upstream request always; for the last attempt (the one
    the client got) also upstream -> client response and the response chains' URP diff."""
    diffs = [
        jdiff.side_by_side(
            "Client request → upstream request",
            "Client request (as received)",
            dump.get("client_request"),
            "Upstream request (as encoded)",
            att.get("upstream_request"),
        )
    ]
    if is_last:
        diffs.append(
            jdiff.side_by_side(
                "Upstream response → client response",
                "Upstream response",
                _response_side(att.get("upstream_response"), att.get("upstream_frames")),
                "Client response",
                _response_side(dump.get("client_response"), dump.get("client_frames")),
            )
        )
        urp = _urp_response_diff(dump, att)
        if urp is not None:
            diffs.append(urp)
    return diffs


def build_detail(dump: dict[str, Any], selected: int | None, staff: bool = True) -> dict[str, Any]:
    attempts = dump.get("attempts") or []
    index = len(attempts) - 1 if selected is None else max(0, min(selected - 1, len(attempts) - 1))
    att = attempts[index] if attempts else {}
    stream = bool(dump.get("stream"))
    tabs = [
        {
            "id": "client-request",
            "title": "Client request",
            "kind": "json",
            "body": _pretty(dump.get("client_request")),
        },
        {
            "id": "internal-request",
            "title": "After request chains (URP)",
            "kind": "json",
            "body": _pretty(att.get("internal_request")),
        },
        {
            "id": "upstream-request",
            "title": "Upstream request",
            "kind": "json",
            "body": _pretty(att.get("upstream_request")),
        },
        _response_tab(
            "upstream-response", "Upstream", att.get("upstream_frames"), att.get("upstream_response")
        ),
        {
            "id": "after-chains",
            "title": "After response chains (URP)",
            "kind": "json",
            "body": _pretty(att.get("response_after_chains")),
        },
        _response_tab("client-response", "Client", dump.get("client_frames"), dump.get("client_response")),
    ]
    is_last = index == len(attempts) - 1
    diffs = _diffs(dump, att, is_last)
    for n, d in enumerate(diffs):
        tabs.append({"id": f"diff-{n}", "title": d.title, "kind": "diff", "diff": d})
    urls = admin_urls(att.get("executed_chain")) if staff else {}
    chain, hidden = visible_chain(chips(att.get("executed_chain"), att.get("rule_steps"), urls), staff)
    return {
        "hidden_transforms": hidden,
        "attempts": attempts,
        "attempt": att,
        "attempt_index": index + 1,
        "tabs": tabs,
        "chain": chain,
        "stream": stream,
        "truncation": dump.get("capture_truncation") or {},
        "thumbnails": [t for t in dump.get("image_thumbnails") or [] if isinstance(t, dict)],
        "notes": att.get("notes") or [],
    }


@viewer_required
def capture_detail(request: HttpRequest, request_id: str) -> HttpResponse:
    cap = find_capture(request.user, request_id)
    dump = load_dump(cap)
    selected = request.GET.get("attempt")
    staff = request.user.is_staff or request.user.is_superuser
    context = build_detail(dump, int(selected) if selected and selected.isdigit() else None, staff)
    context.update({"capture": cap, "dump": dump, "title": f"Capture {cap.request_id}", "can_replay": staff})
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


def _staff(user) -> bool:
    return bool(user.is_staff or user.is_superuser)


@viewer_required
def capture_replay(request: HttpRequest, request_id: str) -> HttpResponse:
    """Replay a captured client request with the current configuration: a dry run (GET), or the
    real upstream call (POST ``send=1``). Staff only: the report shows every chain's rules."""
    from django.core.exceptions import PermissionDenied

    from gateway import playground
    from keys.models import ApiKey

    if not _staff(request.user):
        raise PermissionDenied("replay is for staff")
    cap = find_capture(request.user, request_id)
    dump = load_dump(cap)
    send = request.method == "POST" and request.POST.get("send") == "1"
    key_id = cap.api_key_id if cap.api_key_id and ApiKey.objects.filter(pk=cap.api_key_id).exists() else None
    error = None
    try:
        report = playground.replay(dump, send=send, api_key_id=key_id)
    except playground.PlaygroundError as exc:
        report, error = None, exc.errors
    comparison = None
    if report is not None:
        rep = report["replay"]
        if rep["original_upstream_request"] is not None or rep["new_upstream_request"] is not None:
            comparison = jdiff.side_by_side(
                "Upstream request: captured → now",
                "Captured upstream request",
                rep["original_upstream_request"],
                "Upstream request now",
                rep["new_upstream_request"],
            )
    sent = (report or {}).get("sent")
    return render(
        request,
        "captures/replay.html",
        {
            "capture": cap,
            "dump": dump,
            "report": report,
            "error": error,
            "comparison": comparison,
            "sent": sent,
            "sent_answer": _pretty(sent.get("client_response"))
            if sent and sent.get("client_response") is not None
            else (sent or {}).get("client_stream"),
            "key_gone": bool(cap.api_key_id and key_id is None),
            "title": f"Replay {cap.request_id}",
        },
    )
