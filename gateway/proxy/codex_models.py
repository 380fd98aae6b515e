"""Codex model descriptors for ``GET /v1/models`` (reference protocols.md §6.1: ``models`` =
descriptors for the configured ``codex_model_ids`` present in ``data``, fixed conservative values).

Codex CLI asks its provider for ``GET {base_url}/models?client_version=X.Y.Z`` and parses the body
as ``ModelsResponse {models: [ModelInfo]}``; each entry replaces (by ``slug``) or extends its
bundled catalogue, so a model name Codex does not know (say an Anthropic model behind the gateway)
gets the capabilities we describe instead of its bare fallback (no ``apply_patch`` tool).
Sources followed (openai/codex, read, not copied):

- ``codex-rs/protocol/src/openai_models.rs``: the ``ModelInfo`` and ``ModelsResponse`` field names
  and value spellings (``shell_type`` ``shell_command``, ``visibility`` ``list``,
  ``truncation_policy`` ``{mode, limit}``, reasoning levels as ``{effort, description}``).
- ``codex-rs/codex-api/src/endpoint/models.rs``: the ``models`` path and the ``client_version``
  query parameter.
- ``codex-rs/models-manager/src/manager.rs``: when Codex fetches (its provider uses command-backed
  auth, ``auth = {command = ...}``, or ChatGPT login; a plain ``env_key`` provider never asks) and
  how remote entries merge into the bundled catalogue.

Which keys are required was measured against the pinned CLI (0.171.0, ``tests/e2e/agents``) by
removing one key at a time from a catalogue entry: ``slug``, ``display_name``,
``supported_reasoning_levels``, ``shell_type``, ``visibility``, ``supported_in_api``, ``priority``,
``support_verbosity``, ``truncation_policy``, ``experimental_supported_tools`` and instructions
(``base_instructions``, or ``model_messages.instructions_template``); a body missing one fails to
decode and Codex keeps its bundled catalogue. Older releases also required
``supports_parallel_tool_calls`` and ``supports_reasoning_summaries``, so we send those too. Its
``apply_patch_tool_type`` accepts only ``freeform`` (a Responses custom tool; a Chat or Messages
upstream needs the ``field_custom_tools_to_function`` rules for it).

``base_instructions`` replaces Codex's own system prompt for the model (it is sent as the first
developer message), and Codex's prompt is not ours to ship, so the descriptor carries a short one
of our own; a user can still override it client-side (``model_instructions_file``).
"""

from __future__ import annotations

from typing import Any

INSTRUCTIONS = (
    "You are a coding agent working in the user's workspace through the tools you are given. "
    "Read files before changing them, make the smallest change that does what the user asked, "
    "edit files with the apply_patch tool, run commands to check your work when that helps, "
    "and finish with a short summary of what you changed."
)

_LEVELS = (
    ("low", "Faster answers with lighter reasoning"),
    ("medium", "Balanced speed and reasoning depth"),
    ("high", "Deeper reasoning for complex problems"),
)


def codex_descriptor(model_id: str, priority: int) -> dict[str, Any]:
    """One ``ModelInfo`` with fixed conservative capabilities: text input only, no parallel tool
    calls, no reasoning summaries or verbosity control, no context window claimed (Codex then
    does not auto-compact by size), the freeform ``apply_patch`` tool."""
    return {
        "slug": model_id,
        "display_name": model_id,
        "description": f"{model_id} through the gateway",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [{"effort": e, "description": d} for e, d in _LEVELS],
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": True,
        "priority": priority,
        "upgrade": None,
        "base_instructions": INSTRUCTIONS,
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",
        "truncation_policy": {"mode": "bytes", "limit": 10000},
        "supports_parallel_tool_calls": False,
        "experimental_supported_tools": [],
        "input_modalities": ["text"],
    }


def codex_descriptors(codex_ids: tuple[str, ...], listed: list[str]) -> list[dict[str, Any]]:
    """Descriptors for the configured Codex ids the key can see (those in ``listed``), in the
    configured order (Codex sorts its picker by ``priority``)."""
    if not codex_ids:
        return []
    visible = set(listed)
    return [codex_descriptor(name, i + 1) for i, name in enumerate(n for n in codex_ids if n in visible)]
