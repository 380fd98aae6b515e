"""Observability of the proxy, in the project layer: Prometheus metrics (``metrics``), the
per-request log line (``accesslog``) and the staff live tail (``live``, ``consumer``).

All three hang off one recorder (``recorder.ObserveRecorder``, wired in ``gateway.wiring``; with
request logs on, its subclass ``requestlogs.recorder.RequestLogRecorder`` also builds the row):
it is always on, so its hooks only bump counters and read clocks; everything that could be slow
(the log line's formatting, the live-tail publish) happens once per request in ``on_finish``
and only when someone listens (log level enabled, a live viewer connected).
"""
