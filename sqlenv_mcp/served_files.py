"""A user's SQLite file served in explorer mode, checked each time it is opened or used.

Between two calls the file may be replaced (by a link out of the folder, say), deleted, or
left mid-write by another program. `ServedFile.check` finds what the file is now and says
why it cannot be served, naming the file by its name only: no path of this machine reaches
an agent.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from env_core.errors import DataError

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
WAL_HEADER_BYTES = 32
WAL_MODE = b"\x02\x02"  # the file format's read and write versions (header bytes 18-19)

# What the file is when it is no regular file (by `stat.S_IFMT`).
NOT_A_FILE = {
    stat.S_IFIFO: "a FIFO (named pipe), not a file",
    stat.S_IFDIR: "a folder, not a file",
    stat.S_IFSOCK: "a socket, not a file",
    stat.S_IFCHR: "a device, not a file",
    stat.S_IFBLK: "a device, not a file",
}

# Why a path cannot be followed to a file (by errno), where the system's words mislead.
UNREACHABLE = {
    errno.ELOOP: "a symbolic link loop",
    errno.ENOENT: "no such file or folder",
    errno.EACCES: "permission denied",
}

Identity = tuple[int, int]  # (st_dev, st_ino): which file it is, whatever its path


@dataclass(frozen=True)
class ServedFile:
    """`path` as the user named it or as it sits in the folder (links unresolved); its real
    path must stay within `root` (the folder's real path, or for a lone file its own)."""

    path: Path
    root: Path

    @property
    def name(self) -> str:
        return self.path.name

    def check(self) -> tuple[Path, Identity]:
        """The file's real path and identity now; DataError saying why it cannot be served."""
        try:
            real = Path(os.path.realpath(self.path, strict=True))
            status = os.stat(real)
        except OSError as error:
            reason = UNREACHABLE.get(error.errno, os.strerror(error.errno or 0).lower())
            raise self.refusal(reason) from None
        if not real.is_relative_to(self.root):
            raise self.refusal("it leads out of the folder served")
        kind = stat.S_IFMT(status.st_mode)
        if kind != stat.S_IFREG:
            raise self.refusal(NOT_A_FILE.get(kind, "not a regular file"))
        if _pending_wal(real):
            raise self.refusal(
                f"it is in WAL mode and its {self.name}-wal holds changes not yet in the file; "
                "checkpoint them (PRAGMA wal_checkpoint) or end the program writing it"
            )
        return real, (status.st_dev, status.st_ino)

    def unopenable(self) -> DataError:
        """Why the file could not be opened or read as a database (SQLite said no)."""
        real = Path(os.path.realpath(self.path))
        journal = real.with_name(real.name + "-journal")
        if journal.exists() and journal.stat().st_size > 0:
            return self.refusal(
                f"a writer left an unfinished transaction in {self.name}-journal, which only "
                "a writer can roll back: open the database once with sqlite3 to recover it"
            )
        return self.refusal("it is not a SQLite database, or it is damaged")

    def refusal(self, reason: str) -> DataError:
        return DataError(f"{self.name} cannot be served: {reason}")


def _pending_wal(real: Path) -> bool:
    """Whether a WAL database has frames in its `-wal` file (a reader that must not write
    beside the file could see only what was checkpointed: an older or an empty database)."""
    with real.open("rb") as handle:
        header = handle.read(20)
    if header[18:20] != WAL_MODE:
        return False
    wal = real.with_name(real.name + "-wal")
    return wal.exists() and wal.stat().st_size > WAL_HEADER_BYTES


def files_inside(folder: Path) -> list[ServedFile]:
    """The SQLite files (by suffix) directly inside `folder`, links left unresolved."""
    root = folder.resolve()
    names = sorted(entry.name for entry in os.scandir(folder))
    return [ServedFile(folder / name, root) for name in names if name.endswith(SQLITE_SUFFIXES)]
