"""The playground's HTTP faces: ``POST /api/playground/`` (staff, REST framework auth) and the
admin page ``/admin/playground/`` (a small vanilla-JS page calling that endpoint)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway import playground
from gateway.protocols import CLIENT_PROTOCOLS

TEMPLATES = {
    "chat_completion": {
        "model": "",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello."},
        ],
        "max_tokens": 64,
    },
    "responses": {
        "model": "",
        "instructions": "You are terse.",
        "input": "Say hello.",
        "max_output_tokens": 64,
    },
    "messages": {
        "model": "",
        "system": "You are terse.",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello."}],
    },
}


class PlaygroundView(APIView):
    """Dry-run a request through the current configuration (plus unsaved rule edits)."""

    def post(self, request):
        try:
            report = playground.run(request.data, allow_send=bool(request.user.is_staff))
        except playground.PlaygroundError as exc:
            return Response({"errors": exc.errors}, status=400)
        return Response(report)


def _choices() -> dict:
    from keys.models import ApiKey
    from providers.models import ChannelModel, Provider
    from transforms.forms import transforms_for_scope
    from transforms.models import TransformRule
    from transforms.registry import registry

    form_registry: dict = {}
    for scope in ("provider", "global", "api_key"):
        form_registry.update(transforms_for_scope(scope))
    models = sorted(set(ChannelModel.objects.values_list("model", flat=True)))
    rules = []
    order = {"provider": 0, "global": 1, "api_key": 2}  # the order chains run in
    stored = TransformRule.objects.select_related("provider", "api_key").order_by("position", "id")
    for r in sorted(
        stored, key=lambda r: (order.get(r.scope, 3), r.provider_id or r.api_key_id or 0, r.position, r.pk)
    ):
        owner = r.provider.name if r.provider_id else r.api_key.name if r.api_key_id else ""
        rules.append(
            {
                "id": r.pk,
                "scope": r.scope,
                "owner": owner,
                "transform": r.transform,
                "phase": r.phase,
                "models": r.models,
                "enabled": r.enabled,
                "position": r.position,
                "config": r.config or {},
                "admin_url": playground.rule_admin_url(r.scope, r.pk, r.provider_id or r.api_key_id),
            }
        )
    return {
        "keys": [{"id": k.id, "name": k.name} for k in ApiKey.objects.order_by("name")],
        "models": models,
        "protocols": list(CLIENT_PROTOCOLS),
        "templates": TEMPLATES,
        "rules": rules,
        "transforms": {
            tid: {
                "phases": list(cls.phases),
                "scopes": list(cls.scopes),
                "schema": cls.config_schema,
                "defaults": cls.with_defaults({}),
                "name": cls.name.get("en", tid),
            }
            for tid, cls in registry.items()
        },
        "providers": [{"id": p.id, "name": p.name} for p in Provider.objects.order_by("priority", "name")],
        "form_registry": form_registry,
    }


def playground_page(request: HttpRequest) -> HttpResponse:
    """The admin page; the data it needs is inlined as JSON, the runs go to the REST endpoint."""
    from django.urls import reverse

    boot = {**_choices(), "api_url": reverse("playground")}
    form_registry = boot.pop("form_registry")
    context = {
        **admin.site.each_context(request),
        "title": "Playground",
        "boot": boot,
        "form_registry": form_registry,
    }
    return TemplateResponse(request, "admin/playground.html", context)
