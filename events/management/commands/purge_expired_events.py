from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from events.services.retention import events_expired_count, events_purge_expired_batches
from platform_site.foundation.progress import command_progress


class Command(BaseCommand):
    help = (
        "Delete finished events older than their workspace's retention, with their"
        " delivery attempts, now rather than at the beat task's next run;"
        " EVENT_RETENTION_BATCH at a time. On a terminal, a bar on stderr counts them."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Count the events it would delete; delete none"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        verbosity: int = options["verbosity"]
        # One instant for the count and every batch, so that the two agree.
        now = timezone.now()
        if options["dry_run"]:
            # The count is what a dry run is for: printed at any verbosity.
            expired = events_expired_count(now=now)
            self.stdout.write(f"{expired} events past their workspace's retention would go")
            return
        # Counted first only for a bar that shows (a terminal): the count reads
        # what the purge then reads again.
        shown = verbosity > 0 and self.stderr.isatty()
        deleted = 0
        with command_progress(
            stream=self.stderr,
            verbosity=verbosity,
            desc="events",
            unit="event",
            total=events_expired_count(now=now) if shown else None,
        ) as progress:
            for count in events_purge_expired_batches(now=now):
                deleted += count
                progress.update(count)
        if verbosity > 0:
            self.stdout.write(f"{deleted} events past their workspace's retention deleted")
