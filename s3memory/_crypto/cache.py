"""The key cache: plaintext tenant keys and KMS data keys, in process memory only.

:class:`KeyCache` is what a warm process (a Lambda container) keeps between invocations so
that it does not fetch a tenant's key document, or ask KMS for a data key, again;
:func:`process_key_cache` is the one every memory uses when given none.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class KeyCache:
    """A small thread-safe LRU with a time-to-live, for tenant keys and KMS data keys.

    Share one across tool instances (e.g. at module scope in a Lambda) so a warm container
    does not fetch a tenant's key again for every invocation. Entries are plaintext keys:
    the cache lives in process memory only.
    """

    def __init__(self, *, ttl_seconds: float = 900.0, max_entries: int = 4096) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, value = entry
            if expires < time.monotonic():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic() + self.ttl_seconds, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def discard(self, key: Hashable) -> None:
        """Forget one entry (e.g. the key of an erased tenant)."""
        with self._lock:
            self._entries.pop(key, None)

    def discard_matching(self, predicate: Callable[[Hashable], bool]) -> int:
        """Forget every entry whose cache key satisfies ``predicate``; return how many."""
        with self._lock:
            doomed = [key for key in self._entries if predicate(key)]
            for key in doomed:
                del self._entries[key]
            return len(doomed)


_PROCESS_KEY_CACHE = KeyCache()


def process_key_cache() -> KeyCache:
    """The cache tools use when none is given: one per process, so a warm Lambda reuses it."""
    return _PROCESS_KEY_CACHE
