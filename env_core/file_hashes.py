"""Content hashes of the databases a catalog is keyed by, remembered between starts with what
the file system says of each file (size, inode, modification and change times): a warm start
then reads none of them, where hashing BIRD's databases again would read gigabytes. A file
written since (which changes its change time, whatever its modification time is set to) is
hashed again. A memo that cannot be read is as good as none; one that cannot be written costs
the next start its hashing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from pathlib import Path

MAX_FILES = 4096  # the memo forgets the files it learned of first beyond this many
log = logging.getLogger(__name__)


class FileHashes:
    def __init__(self, memo: Path) -> None:
        self.memo = memo
        self._known: dict[str, list] = {}
        self._changed = False
        with contextlib.suppress(OSError, ValueError, RecursionError):
            known = json.loads(memo.read_bytes())
            if isinstance(known, dict):
                self._known = known

    def of(self, path: Path) -> bytes:
        """The SHA-256 of the file's content."""
        status = path.stat()
        seen = [status.st_size, status.st_ino, status.st_mtime_ns, status.st_ctime_ns]
        key = str(path.resolve())
        entry = self._known.get(key)
        if isinstance(entry, list) and entry[:4] == seen and isinstance(entry[-1], str):
            with contextlib.suppress(ValueError):
                return bytes.fromhex(entry[-1])
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").digest()
        self._known.pop(key, None)
        self._known[key] = [*seen, digest.hex()]
        while len(self._known) > MAX_FILES:
            del self._known[next(iter(self._known))]
        self._changed = True
        return digest

    def save(self) -> None:
        if not self._changed:
            return
        partial = self.memo.with_name(f"{self.memo.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            self.memo.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(self._known))
            partial.replace(self.memo)
        except OSError as error:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            # The cache beside it was written: a folder that takes one file and not the next
            # costs the next start its hashing, not a warning of its own.
            log.debug("cannot remember the databases' hashes in %s (%s)", self.memo, error)
        self._changed = False
