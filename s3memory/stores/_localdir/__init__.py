"""The local directory store (:class:`LocalDirStore`), the embedded default, one concern a module.

- ``store``: :class:`LocalDirStore`, the ObjectStore calls, each in a batch;
- ``writes``: an object's file written in ``.tmp``, synced, then renamed into place;
- ``kept``: the version area (``versioned=True``): keep, retire, restore, list, read and
  delete versions;
- ``index``: the listing index of a large directory (``{root}/.index``), a cache checked
  against its directory's stat, so that a whole listing of it opens no file;
- ``walk``: the walks of the key tree and of the version area below a prefix;
- ``batch``: the batch a thread's calls share, the root checked, the lock, directories and
  a key's file opened by descriptor, and the syncs (with the durability rules: which sync
  covers which crash);
- ``format``: an object file (header, metadata, body) and the names and ids of kept
  versions;
- ``names``: which keys a directory can hold and how their segments are spelt (escaped
  on a case-insensitive file system, recorded in ``.keys``);
- ``files``: the open flags, the checks on a directory, and the steps on one name, never
  through a link (with what the store distrusts).

Each imports only those listed after it (``store`` all of them; ``files`` none).
"""

from .store import LocalDirStore

__all__ = ["LocalDirStore"]
