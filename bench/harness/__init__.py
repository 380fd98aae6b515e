"""Pieces of the benchmark harness that ``bench/run.py`` puts together.

Nothing here is imported by the gateway; the whole package runs only under ``make bench``.
"""
