"""The store contract's versions, for history: every change a version (or a delete marker),
reached by ``list_versions``, ``get_version``, ``head_version`` and ``delete_version``.
"""

from __future__ import annotations

import pytest

from ..._errors import ObjectTooLargeError
from ...stores import NULL_VERSION, ObjectStore
from ._base import StoreContractBase

__all__ = ["StoreVersionsContract"]


class StoreVersionsContract(StoreContractBase):
    """``list_versions``, ``get_version``, ``head_version`` and ``delete_version``.

    The tests named ``test_versions_...`` need a store that keeps every version
    (``keeps_versions()`` is true): on one that keeps none, declare ``versions`` in
    ``lacks`` and they run as strict expected failures. The last two tests run on every
    store: unknown version ids answer ``None``, and a store keeping no versions lists
    each current object once, as version ``NULL_VERSION`` (``ObjectStore``'s defaults
    do; a store overriding them must too). None of the tests needs a precondition.
    """

    def test_versions_are_kept_newest_first(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        assert store.keeps_versions() is True
        bodies = [b"one", b"two!", b"three"]
        etags = [store.put("t/a", body, {"n": str(i)}) for i, body in enumerate(bodies)]
        listed = list(store.list_versions("t/a"))
        assert [(v.key, v.etag, v.size, v.is_latest, v.is_delete_marker) for v in listed] == [
            ("t/a", etags[2], 5, True, False),
            ("t/a", etags[1], 4, False, False),
            ("t/a", etags[0], 3, False, False),
        ]
        ids = [v.version_id for v in listed]
        assert len(set(ids)) == 3 and NULL_VERSION not in ids
        times = [v.last_modified for v in listed]
        assert times == sorted(times, reverse=True) and times[-1] > 0
        for version, n in zip(listed, [2, 1, 0], strict=True):
            got = store.get_version("t/a", version.version_id)
            assert got is not None
            assert (got.body, got.etag, dict(got.metadata)) == (bodies[n], etags[n], {"n": str(n)})
            head = store.head_version("t/a", version.version_id)
            assert head is not None
            assert (head.key, head.size, head.etag, dict(head.metadata)) == (
                "t/a",
                len(bodies[n]),
                etags[n],
                {"n": str(n)},
            )
        current = store.get("t/a")
        assert current is not None and current.body == b"three"

    def test_versions_get_version_max_bytes_bounds_the_body(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        store.put("t/k", b"0123456789", {})
        store.put("t/k", b"new", {})
        _, old = store.list_versions("t/k")
        got = store.get_version("t/k", old.version_id, max_bytes=10)
        assert got is not None and got.body == b"0123456789"
        with pytest.raises(ObjectTooLargeError):
            store.get_version("t/k", old.version_id, max_bytes=9)

    def test_versions_a_delete_adds_a_marker(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        etag = store.put("t/a", b"kept", {"a": "1"})
        store.delete(["t/a"])
        assert store.get("t/a") is None and store.head("t/a") is None and list(store.list("t/")) == []
        marker, kept = store.list_versions("t/")
        assert (marker.key, marker.is_delete_marker, marker.is_latest, marker.etag, marker.size) == (
            "t/a",
            True,
            True,
            "",
            0,
        )
        assert (kept.key, kept.is_delete_marker, kept.is_latest, kept.etag, kept.size) == ("t/a", False, False, etag, 4)
        assert marker.version_id != kept.version_id
        got = store.get_version("t/a", kept.version_id)
        assert got is not None and (got.body, got.etag, dict(got.metadata)) == (b"kept", etag, {"a": "1"})
        assert store.get_version("t/a", marker.version_id) is None
        assert store.head_version("t/a", marker.version_id) is None

    def test_versions_deleting_an_older_version_removes_it_for_good(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"v1", b"v2", b"v3"):
            store.put("t/a", body, {})
        newest, middle, oldest = store.list_versions("t/a")
        store.delete_version("t/a", middle.version_id)
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/")] == [
            (newest.version_id, True),
            (oldest.version_id, False),
        ]
        assert store.get_version("t/a", middle.version_id) is None
        assert store.head_version("t/a", middle.version_id) is None
        store.delete_version("t/a", middle.version_id)  # gone already: not an error
        current = store.get("t/a")
        assert current is not None and current.body == b"v3"
        old = store.get_version("t/a", oldest.version_id)
        assert old is not None and old.body == b"v1"

    def test_versions_deleting_the_current_version_makes_the_previous_current(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        first = store.put("t/a", b"v1", {"n": "1"})
        store.put("t/a", b"v2", {"n": "2"})
        current, previous = store.list_versions("t/a")
        store.delete_version("t/a", current.version_id)
        got = store.get("t/a")
        assert got is not None and (got.body, got.etag, dict(got.metadata)) == (b"v1", first, {"n": "1"})
        head = store.head("t/a")
        assert head is not None and (head.size, head.etag) == (2, first)
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/")] == [(previous.version_id, True)]
        assert [i.key for i in store.list("t/")] == ["t/a"]
        assert store.get_version("t/a", current.version_id) is None
        store.delete_version("t/a", previous.version_id)  # the last one: nothing is left
        assert store.get("t/a") is None and list(store.list("t/")) == [] and list(store.list_versions("t/")) == []

    def test_versions_under_a_delete_marker_the_key_stays_deleted(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        store.put("t/b", b"w1", {})
        store.delete(["t/b"])
        store.put("t/b", b"w2", {})
        newest, marker, oldest = store.list_versions("t/b")
        assert [newest.is_delete_marker, marker.is_delete_marker, oldest.is_delete_marker] == [False, True, False]
        store.delete_version("t/b", newest.version_id)  # the previous version is a delete marker
        assert store.get("t/b") is None and list(store.list("t/")) == []
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/b")] == [
            (marker.version_id, True),
            (oldest.version_id, False),
        ]
        store.delete_version("t/b", marker.version_id)  # the version under it is current again
        got = store.get("t/b")
        assert got is not None and got.body == b"w1"
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/b")] == [(oldest.version_id, True)]

    def test_versions_list_delete_markers_in_their_place(self, store: ObjectStore) -> None:
        """Versions and delete markers written in quick succession (in one second, the
        resolution of some servers' times) are listed in the order they were made."""
        self.unless_lacking("versions")
        made: list[tuple[bool, str]] = []
        for step in ["a", "-", "b", "c", "-", "d", "-", "e", "f", "g", "-"]:
            if step == "-":
                store.delete(["t/k"])
                made.append((True, ""))
            else:
                made.append((False, store.put("t/k", step.encode(), {})))
        listed = list(store.list_versions("t/"))
        assert [(v.is_delete_marker, v.etag) for v in listed] == made[::-1]
        assert [v.is_latest for v in listed] == [True] + [False] * (len(made) - 1)

    def test_versions_purge_removes_every_version_and_marker(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"v1", b"v2", b"v3"):
            store.put("t/a", body, {})
            store.put("t2/a", body, {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])  # a delete marker over one version
        store.put("tt/a", b"x", {})
        old = [(v.key, v.version_id) for v in store.list_versions("t/")]
        assert store.purge("t/") == 5  # three versions of t/a, one of t/b, one delete marker
        assert list(store.list_versions("t/")) == [] and list(store.list("t/")) == []
        assert all(store.get_version(key, version_id) is None for key, version_id in old)
        assert [v.key for v in store.list_versions("t2/")] == ["t2/a"] * 3
        assert [v.key for v in store.list_versions("tt/")] == ["tt/a"]

    def test_versions_of_keys_sharing_a_prefix_are_listed_apart_and_in_order(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for key in ["t/ab", "t/a", "t/a-", "t/ab", "u/a"]:
            store.put(key, key.encode(), {})
        store.put("t/x", b"x", {})
        store.delete(["t/x"])  # only its history is left...
        store.put("t/x/y", b"y", {})  # ... beside a key below it
        store.put("t/x-z", b"z", {})
        assert [(v.key, v.is_delete_marker, v.is_latest) for v in store.list_versions("t/")] == [
            ("t/a", False, True),
            ("t/a-", False, True),
            ("t/ab", False, True),
            ("t/ab", False, False),
            ("t/x", True, True),
            ("t/x", False, False),
            ("t/x-z", False, True),
            ("t/x/y", False, True),
        ]
        assert [v.key for v in store.list_versions("t/a")] == ["t/a", "t/a-", "t/ab", "t/ab"]
        assert [v.key for v in store.list_versions("t/ab")] == ["t/ab", "t/ab"]
        assert [v.key for v in store.list_versions("t/x")] == ["t/x", "t/x", "t/x-z", "t/x/y"]
        assert [v.key for v in store.list_versions("t/x/")] == ["t/x/y"]
        assert list(store.list_versions("t/nothing/")) == []

    def test_versions_limit(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"1", b"2", b"3"):
            store.put("t/a", body, {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])
        store.put("t/c", b"c", {})
        everything = [(v.key, v.version_id) for v in store.list_versions("t/")]
        assert [key for key, _ in everything] == ["t/a", "t/a", "t/a", "t/b", "t/b", "t/c"]
        for limit in range(len(everything) + 2):
            assert [(v.key, v.version_id) for v in store.list_versions("t/", limit=limit)] == everything[:limit]

    def test_versions_page_beyond_one_thousand(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        made: list[tuple[str, bool, str]] = []
        for i in range(1001):
            made.append(("t/a", False, store.put("t/a", b"%d" % i, {})))
            if i in (400, 800):
                store.delete(["t/a"])
                made.append(("t/a", True, ""))
        made.append(("t/b", False, store.put("t/b", b"b", {})))
        expected = made[-2::-1] + made[-1:]  # t/a newest first, then t/b
        assert [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/")] == expected
        assert [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/", limit=1002)] == expected[:1002]

    # -- on every store, keeping versions or not ----------------------------------------------

    def test_unknown_version_ids_answer_none(self, store: ObjectStore) -> None:
        store.put("t/a", b"x", {})
        (version,) = (v for v in store.list_versions("t/") if v.is_latest)
        for version_id in ["", "no-such-version", "0" * 48, "0" * 16 + "m", "../a", "a/b", "\u00e9"]:
            assert store.get_version("t/a", version_id) is None, version_id
            assert store.head_version("t/a", version_id) is None, version_id
            store.delete_version("t/a", version_id)  # not an error, and deletes nothing
        assert store.get_version("t/missing", version.version_id) is None
        assert store.head_version("t/missing", version.version_id) is None
        store.delete_version("t/missing", version.version_id)
        got = store.get_version("t/a", version.version_id)
        assert got is not None and got.body == b"x"
        assert [i.key for i in store.list("t/")] == ["t/a"]

    def test_a_store_keeping_no_versions_lists_each_object_once_as_null(self, store: ObjectStore) -> None:
        store.put("t/a", b"1", {})
        etag = store.put("t/a", b"22", {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])
        listed = list(store.list_versions("t/"))
        if store.keeps_versions():  # the tests above check what it keeps
            assert [v.key for v in listed if not v.is_delete_marker] == ["t/a", "t/a", "t/b"]
            assert all(v.version_id != NULL_VERSION for v in listed)
            return
        assert [(v.key, v.version_id, v.etag, v.size, v.is_latest, v.is_delete_marker) for v in listed] == [
            ("t/a", NULL_VERSION, etag, 2, True, False)
        ]
        got = store.get_version("t/a", NULL_VERSION)
        assert got is not None and (got.body, got.etag) == (b"22", etag)
        head = store.head_version("t/a", NULL_VERSION)
        assert head is not None and (head.size, head.etag) == (2, etag)
        assert store.get_version("t/b", NULL_VERSION) is None
        store.delete_version("t/a", NULL_VERSION)
        assert store.get("t/a") is None and list(store.list_versions("t/")) == []
