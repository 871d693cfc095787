from argparse import ArgumentParser
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bots.models import Bot
from files.models import File
from files.selectors.files import files_reindexable
from files.services.file_index import IndexingOutcome, file_index
from files.services.files import file_reindex
from platform_site.foundation.domain_errors import InvalidValue
from platform_site.foundation.progress import command_progress


class Command(BaseCommand):
    help = (
        "Index every indexed file of a bot again (after a parser upgrade, say): queued for"
        " the workers, as the API's re-index is, or with --inline run here one by one."
        " Files without content, or whose client keeps them unindexed, are skipped."
        " On a terminal, a bar on stderr counts the files."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("bot_id", help="The bot's id (bot_…)")
        parser.add_argument(
            "--inline",
            action="store_true",
            help="Index in this process, one file after the other, instead of queueing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        bot = Bot.objects.filter(id=options["bot_id"]).first()
        if bot is None:
            raise CommandError(f"No bot has the id {options['bot_id']!r}")
        inline: bool = options["inline"]
        verbosity: int = options["verbosity"]
        # Only the id: file_reindex reads each file again, locked.
        files = list(files_reindexable(bot=bot).only("id"))
        counts = Counter({"skipped": File.objects.filter(bot=bot).count() - len(files)})
        with command_progress(
            stream=self.stderr, verbosity=verbosity, desc=bot.id, unit="file", total=len(files)
        ) as progress:
            for file in files:
                counts[self.reindex(file, inline=inline)] += 1
                progress.update(1)
        if verbosity > 0:
            done = ["indexed", "failed"] if inline else ["queued"]
            self.stdout.write(", ".join(f"{counts[key]} {key}" for key in [*done, "skipped"]))

    def reindex(self, file: File, *, inline: bool) -> str:
        try:
            reindexed = file_reindex(file=file, enqueue=not inline)
        except (File.DoesNotExist, InvalidValue):
            return "skipped"  # deleted, or started over, since the list was read
        if not inline:
            return "queued"
        outcome = file_index(file_id=reindexed.id, revision=reindexed.revision)
        return {
            IndexingOutcome.COMPLETED: "indexed",
            IndexingOutcome.FAILED: "failed",
            IndexingOutcome.SKIPPED: "skipped",  # changed meanwhile: its new run indexes it
        }[outcome]
