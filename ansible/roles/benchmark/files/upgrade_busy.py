"""Say whether a package upgrade is under way on this host (run by the benchmark role's hold).

Busy means: a process runs unattended-upgrade itself (its argv[0] or argv[1] is named exactly
`unattended-upgrade`), or a process holds dpkg's lock (apt and dpkg take it with fcntl(2) locks,
apt-pkg/contrib/fileutl.cc GetLock; dpkg's lib/dpkg/dbmodify.c). Ubuntu's
unattended-upgrades.service always runs `unattended-upgrade-shutdown --wait-for-signal`, which
does nothing until shutdown: it is not an upgrade, so a name match would wait for ever.

The lock is queried with F_GETLK, never taken, so apt or dpkg starting at the same moment cannot
fail because of this probe. Prints one line (`idle`, or `busy: ...`); exit 0 idle, 3 busy.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
from pathlib import Path

DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
UPGRADE = "unattended-upgrade"
# struct flock on LP64 Linux (x86_64, aarch64): short l_type, short l_whence, off_t l_start,
# off_t l_len, pid_t l_pid; 32 bytes with padding.
FLOCK = struct.Struct("hhxxxxqqixxxx")


def lock_holder(path: str) -> int | None:
    """The pid holding a write-conflicting fcntl lock on `path`, None when free or absent."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        query = FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        l_type, _, _, _, pid = FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))
    finally:
        os.close(fd)
    return None if l_type == fcntl.F_UNLCK else int(pid)


def command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def upgrade_processes() -> list[tuple[int, list[str]]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = command_line(int(entry.name))
        if any(os.path.basename(a) == UPGRADE for a in argv[:2]):
            found.append((int(entry.name), argv))
    return found


def busy() -> list[str]:
    reasons = []
    for path in DPKG_LOCKS:
        pid = lock_holder(path)
        if pid is not None:
            reasons.append(f"pid {pid} ({' '.join(command_line(pid)) or '?'}) holds {path}")
    for pid, argv in upgrade_processes():
        reasons.append(f"pid {pid} runs {' '.join(argv)}")
    return reasons


def main() -> int:
    reasons = busy()
    print("busy: " + "; ".join(reasons) if reasons else "idle")
    return 3 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
