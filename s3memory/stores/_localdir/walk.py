"""The walks below a prefix: of the key tree (``list``, ``purge``, ``list_versions``) and of
the version area (``list_versions``, ``purge``).

Each walk opens the prefix's own directories from the batch, then every directory below
them from its parent's descriptor with ``O_NOFOLLOW``, visiting only those a key starting
with the prefix can lie in: symbolic links and other non-files are skipped and never
followed, and names the store never writes are passed over. Purged (``prune``), each
directory is synced as it is left, and removed if it was found empty.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator

from .batch import AREA, ROOT, TREE, VERSIONS, Batch, Missing, Tree, fsync_dir
from .files import DIR_FLAGS, close_all
from .names import MAX_KEY_BYTES, KeyNames


def walk_tree(tree: Tree, b: Batch, prefix: str, *, prune: bool = False) -> Generator[tuple[str, int, str], None, None]:
    """``(key, directory descriptor, file name)`` of every regular file whose key starts
    with ``prefix``, in key order; symbolic links and other non-files are skipped and
    never followed. ``prune`` (a purge): sync each directory left, and remove those
    found empty on the way out."""
    start = walk_start(tree, b, prefix, every_level=prune)
    if start is None:
        return
    base_names, base_fds, base_key = start
    top = base_fds[-1] if base_fds else b.root
    # One frame per directory being visited: descriptor, name, parent's descriptor, and
    # the entries still to visit, last key first.
    stack: list[tuple[int, str, int, list[tuple[str, str, bool]]]] = [
        (top, "", -1, dir_entries(tree.names, top, base_key, prefix))
    ]
    try:
        while stack:
            fd, name, parent, entries = stack[-1]
            if not entries:
                stack.pop()
                if fd != top:
                    if prune:
                        fsync_dir(fd)
                        with contextlib.suppress(OSError):
                            os.rmdir(name, dir_fd=parent)
                    os.close(fd)
                continue
            key, entry, is_dir = entries.pop()
            if not is_dir:
                yield key, fd, entry
                continue
            try:
                child = os.open(entry, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # gone, swapped for a link, or unreadable: nothing of ours to list
            stack.append((child, entry, fd, dir_entries(tree.names, child, key, prefix)))
        if prune:  # the prefix's own directories, up to the root, as far as they are empty
            b.dirty[top] = TREE if base_fds else ROOT
            for i in range(len(base_fds) - 1, -1, -1):
                try:
                    os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else b.root)
                except OSError:
                    break
    finally:
        close_all(fd for fd, *_ in stack if fd != top)


def walk_start(
    tree: Tree, b: Batch, prefix: str, *, every_level: bool = False
) -> tuple[list[str], list[int], str] | None:
    """Where a walk below ``prefix`` starts: the names and descriptors (the batch's) of the
    prefix's own directories (the last one's only, unless ``every_level``: a purge removes
    them), and their key; None if no key can lie below it."""
    base = prefix.split("/")[:-1]
    if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
        return None  # no key lies below such a prefix
    try:
        prefix.encode()
    except UnicodeEncodeError:
        return None  # nor below one that is not UTF-8
    base_names = tree.names.spell(base)
    try:
        if every_level:
            base_fds = tree.open_dirs(b, (), base_names, create=False)
        else:
            base_fds = [tree.dir(b, tuple(base_names), create=False)] if base_names else []
    except Missing:
        return None
    return base_names, base_fds, "".join(p + "/" for p in base)


def dir_entries(names: KeyNames, fd: int, dir_key: str, prefix: str) -> list[tuple[str, str, bool]]:
    """``(key, name, is a directory)`` of the entries worth visiting, last key first."""
    entries: list[tuple[str, str, bool]] = []
    try:
        scanned = list(os.scandir(fd))
    except OSError:
        return entries
    decode = names.decode
    for entry in scanned:
        name = entry.name
        if not dir_key and name.startswith("."):
            continue  # the store's own files (.lock, .tmp, .keys); no key starts with '.'
        segment = name if name.isascii() and not names.escaped else decode(name)  # ASCII: as written
        if segment is None:
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if is_file:
            key = dir_key + segment
            if not key.startswith(prefix):
                continue
        elif is_dir:
            key = f"{dir_key}{segment}/"
            if len(key.encode()) > MAX_KEY_BYTES or not (key.startswith(prefix) or prefix.startswith(key)):
                continue
        else:
            continue  # a symbolic link, FIFO, socket or device is not an object
        entries.append((key, name, is_dir))
    entries.sort(reverse=True)
    return entries


def walk_kept(
    tree: Tree, b: Batch, prefix: str, *, prune: bool = False
) -> Generator[tuple[str, int, list[str]], None, None]:
    """``(key, directory descriptor, file names)`` of the version area's directory of
    every key starting with ``prefix`` that has files there (in no particular order);
    symbolic links and other non-files are skipped and never followed. ``prune`` (a
    purge): sync each directory left, and remove those found empty on the way out."""
    base = prefix.split("/")[:-1]
    if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
        return
    try:
        prefix.encode()
    except UnicodeEncodeError:
        return
    area = tree.area(b, create=False)
    if area is None:
        return
    base_names = tree.names.spell(base)
    try:
        base_fds = tree.open_dirs(b, (VERSIONS,), base_names, create=False)
    except Missing:
        return
    top = base_fds[-1] if base_fds else area
    base_key = "/".join(base)
    # One frame per directory being visited: descriptor, name, parent's descriptor,
    # and the directories below it still to visit.
    stack: list[tuple[int, str, int, list[tuple[str, str]]]] = [
        (top, "", -1, _kept_dirs(tree.names, top, base_key, prefix))
    ]
    try:
        while stack:
            fd, name, parent, children = stack[-1]
            if not children:
                stack.pop()
                if fd != top:
                    if prune:
                        fsync_dir(fd)
                        with contextlib.suppress(OSError):
                            os.rmdir(name, dir_fd=parent)
                    os.close(fd)
                continue
            key, entry = children.pop()
            try:
                child = os.open(entry, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            stack.append((child, entry, fd, _kept_dirs(tree.names, child, key, prefix)))
            if key.startswith(prefix):
                try:
                    files = [f.name for f in os.scandir(child) if f.is_file(follow_symlinks=False)]
                except OSError:
                    files = []
                if files:
                    yield key, child, files
        if prune:
            b.dirty[top] = AREA
            for i in range(len(base_fds) - 1, -1, -1):
                try:
                    os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else area)
                except OSError:
                    break
    finally:
        close_all(fd for fd, *_ in stack if fd != top)


def _kept_dirs(names: KeyNames, fd: int, key: str, prefix: str) -> list[tuple[str, str]]:
    """``(key, name)`` of the directories below ``fd`` (the version area's directory of
    ``key``) worth visiting for ``prefix``."""
    try:
        scanned = list(os.scandir(fd))
    except OSError:
        return []
    found = []
    for entry in scanned:
        if not key and entry.name.startswith("."):
            continue  # no key starts with '.'
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        segment = names.decode(entry.name)
        if segment is None:
            continue
        child = f"{key}/{segment}" if key else segment
        if len(child.encode()) <= MAX_KEY_BYTES and (child.startswith(prefix) or prefix.startswith(child + "/")):
            found.append((child, entry.name))
    return found
