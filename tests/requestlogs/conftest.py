"""Request-log tests reuse the capture tests' Celery worker and Redis fixtures."""

from tests.captures.conftest import capture_redis, celery_worker, private_redis  # noqa: F401
