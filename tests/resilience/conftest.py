"""The resilience tests start a whole topology (PostgreSQL, Redis, two instances, Celery): they
run in ``make test-resilience`` (GATEWAY_RESILIENCE=1), not in ``make test``.

The topology starts once per session (about 15 s) and is shared by the modules, which run in a
fixed order: the scale-out properties first (on a quiet topology), then the outages, then the
connection churn."""

import os

import pytest

collect_ignore_glob = [] if os.environ.get("GATEWAY_RESILIENCE") == "1" else ["test_*.py"]

ORDER = ("test_topology.py", "test_outages.py", "test_churn.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return ORDER.index(name) if name in ORDER else len(ORDER)

    items.sort(key=rank)  # stable: the order within a module is kept


@pytest.fixture(scope="session")
def topo(mock_upstream, tmp_path_factory):
    from tests.resilience.harness import started_topology

    with started_topology(mock_upstream.url, tmp_path_factory.mktemp("topo")) as topology:
        yield topology
