"""Model globs (re-exported from the core, ``gateway.proxy.globs``, where routing and the chain
engine use them)."""

from gateway.proxy.globs import any_glob, glob_match

__all__ = ["any_glob", "glob_match"]
