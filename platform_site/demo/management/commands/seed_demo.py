import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bots.models import DeliveryFormat
from platform_site.demo.seeding import DEMO_MEMBER_ROLES, demo_seed
from platform_site.foundation.domain_errors import InvalidValue
from platform_site.foundation.progress import command_progress


class Command(BaseCommand):
    help = (
        "Create a fresh, separate demo workspace (accounts of every role with tokens, a bot "
        "with an indexed file, a chat connection, users and a conversation) and print it."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON object")
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
        # On stderr: stdout is the JSON that `make run` writes to a file.
        with command_progress(
            stream=self.stderr,
            verbosity=options["verbosity"],
            desc="demo accounts",
            unit="account",
            total=len(DEMO_MEMBER_ROLES),
        ) as progress:

            def on_member() -> None:
                progress.update(1)

            try:
                demo = demo_seed(
                    webhook_url=options["webhook_url"],
                    delivery_format=options["delivery_format"],
                    on_member=on_member,
                )
            except InvalidValue as exc:
                # The one value argparse does not check itself.
                raise CommandError(f"--webhook-url: {exc.message}") from None
        self.stdout.write(json.dumps(demo) if options["json"] else json.dumps(demo, indent=2))
