"""While the database is unreachable (issue 13): the Celery tasks that write captures and
request-log rows wait and retry instead of dropping their payload, and the admin, viewer and REST
API answer 503 with a clear message instead of a bare 500. The whole outage, under load, is
``tests/resilience/test_outages.py``; these hold the pieces in-process."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import RequestFactory

from gateway import broker
from gateway.dbdown import MESSAGE, DatabaseUnavailableMiddleware

pytestmark = pytest.mark.unit


def test_a_write_that_meets_an_outage_waits_for_the_database_and_is_written(monkeypatch):
    monkeypatch.setattr(broker, "DB_WAIT_STEP", 0.01)
    calls = []

    @broker.wait_out_db_outage
    def write(rows: list) -> int:
        calls.append(rows)
        if len(calls) < 3:
            raise OperationalError("connection refused")
        return len(rows)

    assert write([1, 2]) == 2
    assert len(calls) == 3


def test_a_long_outage_is_handed_to_celerys_retry(monkeypatch):
    monkeypatch.setattr(broker, "DB_WAIT_STEP", 0.01)
    monkeypatch.setattr(broker, "DB_WAIT_MAX", 0.05)

    @broker.wait_out_db_outage
    def write() -> None:
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError):
        write()


@pytest.mark.parametrize(
    "task_path",
    [
        "captures.tasks.persist_capture",
        "captures.tasks.persist_captures",
        "requestlogs.tasks.persist_request_logs",
    ],
)
def test_the_persisting_tasks_retry_on_a_database_outage(task_path):
    import importlib

    module, name = task_path.rsplit(".", 1)
    task = getattr(importlib.import_module(module), name)
    assert OperationalError in task.autoretry_for
    assert task.max_retries == broker.DB_RETRY_MAX and task.retry_backoff_max == broker.DB_RETRY_BACKOFF_MAX


@pytest.mark.parametrize(
    ("path", "kind"), [("/admin/keys/apikey/", "text/html"), ("/api/api-keys/", "application/json")]
)
def test_the_admin_and_api_say_the_database_is_unreachable(path, kind):
    request = RequestFactory().get(path)
    middleware = DatabaseUnavailableMiddleware(lambda r: None)
    response = middleware.process_exception(request, OperationalError("connection refused"))
    assert response is not None and response.status_code == 503
    assert response["Retry-After"] == "5" and response["content-type"].startswith(kind)
    assert "database is unreachable" in response.content.decode()
    assert middleware.process_exception(request, ValueError("not ours")) is None


def test_the_rest_api_handler_answers_503_on_a_database_outage():
    from gateway.api_errors import exception_handler

    response = exception_handler(OperationalError("connection refused"), {})
    assert response.status_code == 503 and response.data["code"] == "database_unavailable"
    assert response.data["detail"] == MESSAGE
