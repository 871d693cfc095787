import json
import os
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bots.models import DeliveryFormat
from platform_site.demo.seeding import DEMO_MEMBER_ROLES, demo_reuse, demo_seed
from platform_site.foundation.domain_errors import InvalidValue
from platform_site.foundation.progress import command_progress


class Command(BaseCommand):
    help = (
        "Create a fresh, separate demo workspace (accounts of every role with tokens, a bot "
        "with an indexed file, a chat connection, users and a conversation) and print it; "
        "with --save, reuse the one saved there while it is still whole."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON object")
        parser.add_argument(
            "--save",
            metavar="PATH",
            help=(
                "Keep the demo in this JSON file: reuse the one it holds while its workspace, "
                "bot, chat and owner token are still there (its webhook URL set anew), else "
                "seed one and write it there. Prints nothing."
            ),
        )
        parser.add_argument(
            "--fresh", action="store_true", help="With --save: seed a new demo all the same"
        )
        parser.add_argument(
            "--webhook-url",
            default="",
            help="Where the demo bot's events are delivered (e.g. examples/echo_bot.py's URL)",
        )
        parser.add_argument(
            "--delivery-format",
            choices=DeliveryFormat.values,
            default=DeliveryFormat.STANDARD,
            help=(
                "How the demo bot's events are POSTed: standard (Standard Webhooks), or "
                "botpress for a bot written with the official SDK (examples/sdk_bot)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        save = Path(options["save"]) if options["save"] else None
        demo = None
        try:
            if save is not None and not options["fresh"]:
                demo = self._reused(save, webhook_url=options["webhook_url"])
            if demo is None:
                demo = self._seeded(options)
        except InvalidValue as exc:
            # The one value argparse does not check itself.
            raise CommandError(f"--webhook-url: {exc.message}") from None
        if save is None:
            self.stdout.write(json.dumps(demo) if options["json"] else json.dumps(demo, indent=2))
            return
        # Written whole or not at all: the credentials are in no other place.
        partial = save.with_name(save.name + ".partial")
        partial.write_text(json.dumps(demo, indent=2) + "\n")
        os.replace(partial, save)

    def _reused(self, save: Path, *, webhook_url: str) -> dict[str, Any] | None:
        try:
            saved = json.loads(save.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict):
            return None
        demo = demo_reuse(saved=saved, webhook_url=webhook_url)
        if demo is not None:
            # Plain: Django styles stderr as an error, and this is news, not one.
            self.stderr.write(
                f"Reusing the demo saved in {save} (a new one: --fresh).", style_func=str
            )
        return demo

    def _seeded(self, options: dict[str, Any]) -> dict[str, Any]:
        # On stderr: stdout is the JSON that a caller may write to a file.
        with command_progress(
            stream=self.stderr,
            verbosity=options["verbosity"],
            desc="demo accounts",
            unit="account",
            total=len(DEMO_MEMBER_ROLES),
        ) as progress:

            def on_member() -> None:
                progress.update(1)

            return demo_seed(
                webhook_url=options["webhook_url"],
                delivery_format=options["delivery_format"],
                on_member=on_member,
            )
