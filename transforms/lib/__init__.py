"""Helpers shared by several transforms (not transforms themselves: ``transforms/builtin/`` holds
only transform modules, one per transform)."""
