"""Shared fixtures. Helpers for servers live in tests/servers.py."""
