"""The last step of `make pyz`: the archive shiv wrote, rewritten with fixed file modes, the
version gate as its `__main__` (deploy/pyz_gate.py), and beside it the guarding start the gate
imports (deploy/pyz_main.py, as `_toolcall_main.py`).

shiv stores each file with the mode it had in the build folder, which the builder's umask
decides (0600 under umask 077, group-writable under 002): unpacked, those modes are the
folder's. Every file is stored 0644 here (0755 if it was executable), so the same sources
give the same bytes whatever the umask, and nothing unpacked is writable by others.

Usage: python deploy/pyz_finish.py ARCHIVE
"""

from __future__ import annotations

import os
import stat
import sys
import zipfile
from pathlib import Path

GATE = Path(__file__).with_name("pyz_gate.py")
MAIN = Path(__file__).with_name("pyz_main.py")
MAIN_MODULE = "_toolcall_main.py"  # as the gate imports it, from the archive's root


def fixed_mode(external_attr: int) -> int:
    """A stored file's mode as the archive keeps it: 0755 if executable, else 0644."""
    mode = external_attr >> 16
    return stat.S_IFREG | (0o755 if mode & 0o111 else 0o644)


def finish(archive: Path) -> None:
    """Rewrite `archive` in place (its shebang kept): fixed modes, the gate, the guarding
    start."""
    data = archive.read_bytes()
    shebang = data[:data.index(b"\n") + 1] if data.startswith(b"#!") else b""
    with zipfile.ZipFile(archive) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    partial = archive.with_name(archive.name + ".partial")
    with partial.open("wb") as out:
        out.write(shebang)
        with zipfile.ZipFile(out, "w") as target:
            for info, content in entries:
                entry = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                entry.compress_type = info.compress_type
                entry.external_attr = fixed_mode(info.external_attr) << 16
                if info.filename == "__main__.py":
                    content = GATE.read_bytes()
                    main = zipfile.ZipInfo(MAIN_MODULE, date_time=info.date_time)
                    main.compress_type = info.compress_type
                    main.external_attr = fixed_mode(0) << 16
                    target.writestr(main, MAIN.read_bytes())
                target.writestr(entry, content)
    os.chmod(partial, 0o755)
    os.replace(partial, archive)


if __name__ == "__main__":
    finish(Path(sys.argv[1]))
