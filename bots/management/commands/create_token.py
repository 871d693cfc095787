from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from bots.services.tokens import access_token_create


class Command(BaseCommand):
    help = "Create a personal access token for an account and print it (shown only once)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--email", required=True, help="The account's email address")
        parser.add_argument("--name", default="", help="A name to recognise the token by")
        parser.add_argument(
            "--expires-in-days", type=int, default=None, help="Days until the token expires"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        accounts = get_user_model().objects.filter(email__iexact=options["email"])
        if accounts.count() != 1:
            raise CommandError(f"No single account has the email {options['email']!r}")
        days = options["expires_in_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-in-days must be at least 1")
        token, raw = access_token_create(
            account=accounts.get(), name=options["name"], expires_in_days=days
        )
        self.stdout.write(raw)
        self.stderr.write(f"Token {token.prefix}… created; it will not be shown again.")
