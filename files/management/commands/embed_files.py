from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bots.models import Bot
from files.embeddings.model import model
from files.models import File
from files.services.embeddings import file_embed, files_mark_embeddings_due
from platform_site.foundation.progress import command_progress


class Command(BaseCommand):
    help = (
        "Compute the sentence embeddings of indexed files that have none, or stale ones"
        " (indexed before semantic search was installed, or by another model): every"
        " bot's, or one bot's. Here one file after the other, or with --queue by the"
        " workers (beat queues due files every FILE_HOUSEKEEPING_INTERVAL)."
        " On a terminal, a bar on stderr counts the files."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("bot_id", nargs="?", help="Only this bot's files (bot_…)")
        parser.add_argument(
            "--queue", action="store_true", help="Mark the files due for the workers and stop"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if model() is None:
            raise CommandError(
                "Semantic search is off (FILE_SEARCH_SEMANTIC=false, or the `semantic` extra"
                " is not installed: pip install 'bot-platform[semantic]')"
            )
        bot = None
        if options["bot_id"] is not None:
            bot = Bot.objects.filter(id=options["bot_id"]).first()
            if bot is None:
                raise CommandError(f"No bot has the id {options['bot_id']!r}")
        verbosity: int = options["verbosity"]
        marked = files_mark_embeddings_due(bot=bot)
        if options["queue"]:
            if verbosity > 0:
                self.stdout.write(f"{marked} due for the workers")
            return
        due = File.objects.filter(embeddings_due_at__isnull=False)
        if bot is not None:
            due = due.filter(bot=bot)
        ids = list(due.order_by("id").values_list("id", flat=True))
        embedded = 0
        with command_progress(
            stream=self.stderr, verbosity=verbosity, desc="embed", unit="file", total=len(ids)
        ) as progress:
            for file_id in ids:
                embedded += file_embed(file_id=file_id)
                progress.update(1)
        if verbosity > 0:
            # A file skipped changed meanwhile: its new passages are due again.
            self.stdout.write(f"{embedded} embedded, {len(ids) - embedded} skipped")
