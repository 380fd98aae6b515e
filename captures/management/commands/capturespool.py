"""``manage.py capturespool``: what waits in this host's capture spool and what was set aside.

Captures that could not be written when they were recorded wait in ``DATA_DIR/capture-spool``;
one that failed ``GATEWAY_CAPTURE_DEAD_LETTER_AFTER`` times for its own sake is moved to
``capture-spool/dead/`` so the others flow. Staff look here, fix the cause, then ``--requeue``
(the writer picks them up again) or ``--purge-dead``."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from captures.sink import dead_dir, spool_dir


class Command(BaseCommand):
    help = "Show the capture spool (pending and dead-lettered captures); requeue or purge dead ones."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--requeue", action="store_true", help="move dead-lettered captures back to the spool"
        )
        parser.add_argument("--purge-dead", action="store_true", help="delete dead-lettered captures")

    def handle(self, *args, requeue: bool = False, purge_dead: bool = False, **options) -> None:
        spool, dead = spool_dir(), dead_dir()
        pending = sorted(p for p in spool.glob("*") if p.is_file()) if spool.is_dir() else []
        dead_files = sorted(dead.glob("*.cap")) if dead.is_dir() else []
        self.stdout.write(f"spool: {spool}")
        self.stdout.write(f"pending: {len(pending)} ({sum(p.stat().st_size for p in pending)} bytes)")
        self.stdout.write(f"dead-lettered: {len(dead_files)}")
        for p in dead_files:
            self.stdout.write(f"  {p.name}")
        if requeue:
            for p in dead_files:
                p.rename(spool / p.name)
            self.stdout.write(f"requeued {len(dead_files)}")
        elif purge_dead:
            for p in dead_files:
                p.unlink(missing_ok=True)
            self.stdout.write(f"purged {len(dead_files)}")
