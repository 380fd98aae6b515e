"""Chain editors. Basic inlines; the schema-driven config form replaces the raw JSON box."""

from __future__ import annotations

from django.contrib import admin

from transforms.models import TransformRule


class _RuleInline(admin.TabularInline):
    model = TransformRule
    extra = 0
    fields = ("position", "transform", "enabled", "phase", "models", "config")
    ordering = ("position", "id")
    scope = ""

    def get_formset(self, request, obj=None, **kwargs):
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


class GlobalTransformRule(TransformRule):
    class Meta:
        proxy = True
        verbose_name = "global transform rule"
        verbose_name_plural = "Global transform chain"

    def clean(self) -> None:
        # Rows of this proxy are global rules: fix the scope before validate_rule sees it
        # (the admin form runs full_clean() before save_model could set it).
        self.scope = "global"
        super().clean()


@admin.register(GlobalTransformRule)
class GlobalTransformRuleAdmin(admin.ModelAdmin):
    list_display = ("position", "transform", "phase", "enabled", "models")
    list_editable = ("enabled",)
    ordering = ("position", "id")
    fields = ("position", "transform", "enabled", "phase", "models", "config")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(scope="global")

    def save_model(self, request, obj, form, change):
        obj.scope = "global"
        super().save_model(request, obj, form, change)
