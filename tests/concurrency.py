"""Calls made at once from threads, each on a database connection of its
own (tests marked `django_db(transaction=True)`, so that each sees what the
others commit)."""

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import close_old_connections

T = TypeVar("T")


def at_once(calls: int, call: Callable[[], T]) -> list[T]:
    """What `call()` answered in each of `calls` threads released together,
    in the order they ended; a call that raises fails the test."""
    start = threading.Barrier(calls)
    answers: list[T] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            answers.append(call())
        except BaseException as error:  # reported below, with the others
            failures.append(error)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert len(answers) == calls, "a call did not end within a minute"
    return answers
