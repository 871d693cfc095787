import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from platform_site.demo.banner import demo_banner


class Command(BaseCommand):
    help = "Print the URLs, demo credentials and a working curl line for each endpoint."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("demo_json", type=Path, help="The output of `seed_demo --json`")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["demo_json"]
        self.stdout.write(demo_banner(json.loads(path.read_text()), path))
