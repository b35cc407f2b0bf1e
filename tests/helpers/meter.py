"""Counting the requests a memory makes, as botocore makes them."""

from __future__ import annotations

from collections import Counter
from typing import Any


class Meter:
    """Counts API operations made through the given boto3 clients (``event`` narrows them,
    e.g. ``"before-call.s3"``)."""

    def __init__(self, *clients: Any, event: str = "before-call") -> None:
        self.calls: Counter[str] = Counter()
        for client in clients:
            client.meta.events.register(event, self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def take(self) -> dict[str, int]:
        """The operations counted since the last take, by name."""
        taken = dict(self.calls)
        self.calls.clear()
        return taken

    def take_total(self) -> int:
        """How many operations since the last take."""
        return sum(self.take().values())
