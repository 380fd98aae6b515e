"""Shared fixtures. Helpers for servers live in tests/servers.py."""

import os

# The suite serves test images from loopback: let the outbound fetcher (gateway.fetch) reach
# private addresses in this process and in every gateway subprocess (which inherit the
# environment). The SSRF guard's own tests turn it off with monkeypatch.
os.environ.setdefault("GATEWAY_FETCH_ALLOW_PRIVATE", "1")

# --- Hypothesis: the property tests draw new examples on every run here (they found real bugs
# that way); CI (.ci/run sets HYPOTHESIS_PROFILE=ci) replays the same examples on every run, so a
# newly drawn counterexample can never turn main red by chance.
from hypothesis import settings as _hypothesis  # noqa: E402

_hypothesis.register_profile("ci", derandomize=True, database=None)
_hypothesis.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# --- end-to-end servers (tests/servers.py) -----------------------------------------------------------

import os  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

# --- one Redis database set per pytest-xdist worker ------------------------------------------------
# make test runs two workers; tests flush their Redis databases, so each worker gets its own three:
# the general one (REDIS_URL_FOR_TESTS), the captures one and a spare (worker n: 15-3n, 14-3n, 13-3n).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and _WORKER[2:].isdigit():
    _n = int(_WORKER[2:]) % 5
    for _var, _db in (
        ("REDIS_URL_FOR_TESTS", 15),
        ("CAPTURE_REDIS_URL_FOR_TESTS", 14),
        ("SPARE_REDIS_URL_FOR_TESTS", 13),
    ):
        _base = os.environ.get(_var, f"redis://127.0.0.1:6379/{_db}").rsplit("/", 1)[0]
        os.environ[_var] = f"{_base}/{_db - 3 * _n}"

# --- markers by kind: unit (the default), e2e, fuzz, browser, agents, postgres ----------------------------
# Assigned from where a test lives and which servers it starts, so a new test file is classified
# without remembering to decorate it. ``make test-fast`` runs ``-m unit``.
_SERVER_FIXTURES = {"gateway", "gateway_server", "gateway_factory", "mock_upstream", "live_server"}
_TESTS_DIR = Path(__file__).parent


def _kind(item) -> str:
    path = Path(str(item.fspath))
    if not path.is_relative_to(_TESTS_DIR):  # e.g. examples/monogate-redact/tests: in-process tests
        return "unit"
    parts = path.relative_to(_TESTS_DIR).parts
    if parts[:2] == ("e2e", "agents"):
        return "agents"
    if parts[0] == "browser":
        return "browser"
    if parts[0] == "fuzz":
        return "fuzz"
    fixtures = set(getattr(item, "fixturenames", ()))
    if parts[0] == "e2e" or fixtures & _SERVER_FIXTURES or "e2e" in Path(parts[-1]).stem.split("_"):
        return "e2e"
    return "unit"


def pytest_collection_modifyitems(config, items):
    on_postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    kinds = {"unit", "e2e", "fuzz", "browser", "agents"}
    for item in items:
        if not kinds & {mark.name for mark in item.iter_markers()}:  # an explicit kind wins
            item.add_marker(getattr(pytest.mark, _kind(item)))
        if item.get_closest_marker("agents"):  # one worker installs and runs the agent CLIs
            item.add_marker(pytest.mark.xdist_group("agents"))
        if on_postgres:
            item.add_marker(pytest.mark.postgres)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Expose each phase's report on the item (``item.rep_call``) so fixtures can see failures."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def mock_upstream():
    """The bundled mock upstream on a free port for the whole session."""
    from tests.servers import MockUpstreamServer

    server = MockUpstreamServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gateway_server(django_db_setup, django_db_blocker, mock_upstream, request):
    """Our production ASGI server on the test database, for the whole session (no Redis).

    The body limit is lowered to 1 MiB so the 413 test does not need a 50 MiB body. The log file
    is kept only when some test failed."""
    from tests.servers import GatewayServer

    with django_db_blocker.unblock():
        server = GatewayServer({"GATEWAY_MAX_BODY_BYTES": str(1024 * 1024)}).start()
    yield server
    server.stop()
    if not request.session.testsfailed:
        server.log_path.unlink(missing_ok=True)


def _print_log_on_failure(request, server, since: int) -> None:
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"\n----- gateway log ({server.log_path}) -----\n{server.log_tail(since)}")


@pytest.fixture
def gateway(gateway_server, mock_upstream, transactional_db, request):
    """Per test: committed rows visible to the server, a clean mock, and the server log printed on failure."""
    mock_upstream.reset()
    since = gateway_server.log_size()
    yield gateway_server
    _print_log_on_failure(request, gateway_server, since)


@pytest.fixture
def gateway_factory(transactional_db, django_db_blocker, request):
    """Start extra gateway servers with custom environment (``gateway_factory({"GATEWAY_...": "1"})``);
    each is stopped at the end of the test and its log printed if the test failed."""
    from tests.servers import GatewayServer

    started: list[GatewayServer] = []

    def start(env: dict[str, str] | None = None, *, workers: int = 1) -> GatewayServer:
        server = GatewayServer(env, name="gateway-extra", workers=workers).start()
        started.append(server)
        return server

    yield start
    for server in started:
        _print_log_on_failure(request, server, 0)
        server.stop()
        if not getattr(getattr(request.node, "rep_call", None), "failed", False):
            server.log_path.unlink(missing_ok=True)


@pytest.fixture(scope="session", autouse=True)
def _end_lingering_db_sessions(django_db_setup, django_db_blocker):
    """On PostgreSQL, end sessions that background threads (capture writer, config pollers of
    in-process apps) still hold when the suite ends, so the test database can be dropped."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    connection.close()


# --- spools outside the repository's data/ ---------------------------------------------------------
@pytest.fixture(scope="session", autouse=True)
def _spools_in_a_temp_dir(tmp_path_factory):
    """In-process proxy apps of tests without database access hand their request-log rows to the
    production writer, which spools what it cannot write under ``settings.DATA_DIR``: by default
    the repository's ``data/``, the one ``make run`` serves from, whose gateway would then try to
    deliver test rows. The spools are the only thing read from ``DATA_DIR`` at run time (the
    secret key, the test database's name and ``STATIC_ROOT`` were fixed at import). Tests that set
    their own ``settings.DATA_DIR`` still do. Not put back at the end: writer threads flush at
    interpreter exit, after the session's teardown."""
    from django.conf import settings

    settings.DATA_DIR = tmp_path_factory.mktemp("data")
