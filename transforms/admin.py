"""Chain editors: provider and API-key chains as inlines (used by ``providers/admin.py`` and
``keys/admin.py``), and the global chain as its own admin.

Each rule's config is edited through a form generated from the transform's JSON Schema (see
``transforms/forms.py`` and ``static/transforms/rule_form.js``); the transform picker offers
only transforms that fit the chain's scope; rules are reordered with up/down buttons.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Max
from django.http import HttpRequest, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from transforms.forms import (
    NOT_INSTALLED,
    SchemaConfigWidget,
    registry_element_id,
    rule_form_for,
    transforms_for_scope,
)
from transforms.models import GlobalTransformRule, TransformRule
from transforms.registry import registry

_RULE_FIELDS = ("transform", ("phase", "enabled"), "models", "config", "position")


class _RuleInline(admin.StackedInline):
    model = TransformRule
    extra = 0
    fields = _RULE_FIELDS
    ordering = ("position", "id")
    template = "transforms/edit_inline/rule_chain.html"
    scope = ""

    @property
    def media(self):
        return super().media + SchemaConfigWidget().media

    # Read by the chain template: the schemas of this scope, embedded once per chain.
    def registry_payload(self) -> dict:
        return transforms_for_scope(self.scope)

    def registry_element_id(self) -> str:
        return registry_element_id(self.scope)

    def get_formset(self, request, obj=None, **kwargs):
        kwargs["form"] = rule_form_for(self.scope)
        formset = super().get_formset(request, obj, **kwargs)
        scope = self.scope

        class ScopedFormSet(formset):
            def save_new(self, form, commit=True):
                form.instance.scope = scope
                return super().save_new(form, commit=commit)

            def _construct_form(self, i, **kw):
                form = super()._construct_form(i, **kw)
                form.instance.scope = scope
                return form

        return ScopedFormSet


class ProviderRuleInline(_RuleInline):
    scope = "provider"
    fk_name = "provider"
    verbose_name = "provider transform rule"
    verbose_name_plural = "Provider transform chain (runs first)"


class ApiKeyRuleInline(_RuleInline):
    scope = "api_key"
    fk_name = "api_key"
    verbose_name = "API key transform rule"
    verbose_name_plural = "API key transform chain (runs last)"


@admin.register(GlobalTransformRule)
class GlobalTransformRuleAdmin(admin.ModelAdmin):
    """The global chain: runs after every provider chain and before every API-key chain.

    The form fixes ``scope="global"`` before validation. The list shows the chain in execution
    order with up/down buttons (POST, one swap per click) and an enabled toggle.
    """

    form = rule_form_for("global", embed_registry=True)
    list_display = ("order_buttons", "position", "transform_label", "phase", "enabled", "models_label")
    list_display_links = ("transform_label",)
    list_editable = ("enabled",)
    ordering = ("position", "id")
    fieldsets = ((None, {"fields": _RULE_FIELDS}),)

    def get_queryset(self, request):
        return super().get_queryset(request).filter(scope="global")

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        initial = super().get_changeform_initial_data(request)
        last = TransformRule.objects.filter(scope="global").aggregate(m=Max("position"))["m"]
        initial.setdefault("position", 0 if last is None else last + 1)
        return initial

    def save_model(self, request, obj, form, change):
        obj.scope = "global"
        super().save_model(request, obj, form, change)

    @admin.display(description="Transform", ordering="transform")
    def transform_label(self, obj: TransformRule) -> str:
        entry = transforms_for_scope("global").get(obj.transform)
        if entry:
            return f"{entry['name']['en']} ({obj.transform})"
        if obj.transform not in registry:
            return f"{obj.transform} ({NOT_INSTALLED})"
        return f"{obj.transform} (not available in this scope)"

    @admin.display(description="Models")
    def models_label(self, obj: TransformRule) -> str:
        return ", ".join(obj.models) if obj.models else "all models"

    @admin.display(description="Order")
    def order_buttons(self, obj: TransformRule) -> str:
        # Buttons of the changelist form (which carries the CSRF token), posting to move_view.
        buttons = [
            format_html(
                '<button type="submit" formmethod="post" formaction="{}" class="rule-move rule-{}" '
                'title="Move {}" aria-label="Move rule {}">{}</button>',
                reverse("admin:transforms_globaltransformrule_move", args=[obj.pk, direction]),
                direction,
                direction,
                direction,
                arrow,
            )
            for direction, arrow in (("up", "↑"), ("down", "↓"))
        ]
        return format_html('<span class="global-rule-move">{} {}</span>', *buttons)

    @property
    def media(self):
        return super().media + SchemaConfigWidget().media

    def get_urls(self):
        urls = super().get_urls()
        move = path(
            "<int:pk>/move/<str:direction>/",
            self.admin_site.admin_view(self.move_view),
            name="transforms_globaltransformrule_move",
        )
        return [move, *urls]

    def move_view(self, request: HttpRequest, pk: int, direction: str):
        """Swap a rule with its neighbour in the global chain. Positions are renumbered 0..n-1
        in the current order first, so ties and gaps cannot make a click do nothing."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        changelist = reverse("admin:transforms_globaltransformrule_changelist")
        rule = get_object_or_404(GlobalTransformRule, pk=pk, scope="global")
        if direction not in ("up", "down"):
            return HttpResponseRedirect(changelist)
        with transaction.atomic():
            chain = list(
                TransformRule.objects.select_for_update().filter(scope="global").order_by("position", "id")
            )
            index = next(i for i, r in enumerate(chain) if r.pk == rule.pk)
            other = index - 1 if direction == "up" else index + 1
            if not 0 <= other < len(chain):
                return HttpResponseRedirect(changelist)
            chain[index], chain[other] = chain[other], chain[index]
            for position, item in enumerate(chain):
                if item.position != position:
                    item.position = position
                    item.save(update_fields=["position"])
        messages.success(request, f"Moved {rule.transform} {direction}.")
        return HttpResponseRedirect(changelist)
