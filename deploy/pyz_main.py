"""The single file's `__main__` (written into toolcall-proxy.pyz in place of shiv's own by
`deploy/pyz_finish.py`), read from the archive itself: it runs only code the file unpacked.

shiv unpacks the file once per build into `<root>/toolcall-proxy.pyz_<build id>/` and then
runs what that folder holds (its `.pth` files, the preamble, the proxy). The build id is
public, so on a root other users can write to (a shared `SHIV_ROOT`) one of them could make
that folder first, with code of theirs in it, or shiv's own temporary one
(`<name>_<build id>.tmp`), which shiv would unpack into and then copy, planted files and
all, when it cannot rename a folder it does not own. So shiv never unpacks here: the file is
unpacked into a new folder of this process's own (mkdtemp: made new, 0700, no link
followed), which is then renamed into place whole; a folder already in place must be a
directory owned by this user (or root) that no group or other user can write to, in a root
where no one else can swap it (the root and every folder above it owned by this user or
root, and not writable by others unless sticky like /tmp); else one line on stderr and exit
status 2. The default root, ~/.shiv, is kept private (0700).

Parsable by Python 3.7 (no walrus, no f-string `=`): an old Python reaches the preamble's
one-line message, not a SyntaxError.
"""

from __future__ import annotations  # (3.7: annotations are not evaluated)

import compileall
import errno
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import NoReturn

import _bootstrap
from _bootstrap.environment import Environment

TRUSTED_OWNERS = (os.geteuid(), 0)


def refuse(message: str) -> NoReturn:
    """One line on stderr, exit status 2."""
    print("toolcall-proxy: " + message, file=sys.stderr)
    raise SystemExit(2)


def unsafe_folder(path: Path) -> str | None:
    """Why code in `path` may have been put there by someone else (None: it may not)."""
    try:
        info = os.lstat(str(path))
    except FileNotFoundError:
        return "is missing"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid not in TRUSTED_OWNERS:
        return "is owned by another user"
    if info.st_mode & 0o022:
        return "is writable by its group or by others"
    return None


def _folders_above(root: Path) -> list[Path]:
    """`root` and every folder above it, as written and as its links lead (a link is
    replaced by whoever owns it or may write to the folder holding it), `root` first."""
    folders: list[Path] = []
    for path in (Path(os.path.abspath(str(root))), Path(os.path.realpath(str(root)))):
        for folder in (path, *path.parents):
            if folder not in folders:
                folders.append(folder)
    return folders


def unsafe_root(root: Path) -> str | None:
    """Why others could replace a folder in `root`, or `root` itself (None: they cannot):
    `root` and every folder (or link) above it must be owned by this user or root, and
    writable by no one else unless sticky as /tmp is (the owner of a sticky folder may
    still rename what others keep in it)."""
    folders = _folders_above(root)
    itself = {folders[0], Path(os.path.realpath(str(root)))}
    for folder in folders:
        info = os.lstat(str(folder))
        where = "" if folder in itself else f"is in {folder}, which "
        if info.st_uid not in TRUSTED_OWNERS:
            return where + "is owned by another user: they could replace what is unpacked there"
        if (stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022
                and not info.st_mode & stat.S_ISVTX):
            return where + ("is writable by others and not sticky: they could replace what "
                            "is unpacked there")
    return None


def private_root(root: Path, default: bool) -> None:
    """The root, made if missing (0700, and so is each folder made above it); the default
    one (~/.shiv) kept 0700."""
    mask = os.umask(0o077)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(mask)
    if default:
        info = os.stat(str(root))
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            os.chmod(str(root), 0o700)


def unpack(archive: zipfile.ZipFile, env: Environment, target: Path) -> None:
    """Unpack the file's site-packages to `target` (when not there yet): into a new private
    folder of this process's own beside it, renamed into place whole. Another start that got
    there first wins; a folder someone else put there is left to the checks (and refused)."""
    if os.path.lexists(str(target)) and not env.force_extract:
        return
    mask = os.umask(0o077)
    draft = None
    try:
        draft = Path(tempfile.mkdtemp(prefix="." + target.name + ".", dir=str(target.parent)))
        for info in archive.infolist():
            if info.filename.startswith("site-packages/"):
                os.chmod(archive.extract(info, str(draft)), info.external_attr >> 16)
        if env.compile_pyc:
            compileall.compile_dir(str(draft), quiet=2, workers=env.compile_workers)
        if env.force_extract and unsafe_folder(target) is None:
            shutil.rmtree(str(target))
        os.rename(str(draft), str(target))
        draft = None
    except OSError as error:
        taken = error.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EPERM, errno.EACCES)
        if not (taken and os.path.lexists(str(target))):  # (else: the checks decide)
            refuse(f"cannot unpack into {target}: {error.strerror or error}")
    finally:
        os.umask(mask)
        if draft is not None:
            shutil.rmtree(str(draft), ignore_errors=True)
    os.environ.pop(Environment.FORCE_EXTRACT, None)  # unpacked: shiv must not do it again


def refuse_unless_safe(path: Path, why: str | None, advice: str = "remove it, or ") -> None:
    """Exit when `why` (a reason `path` is not safe) is given."""
    if why:
        refuse(f"will not run code from {path}, which {why}; {advice}set SHIV_ROOT to a "
               "directory of your own")


def checked_folder() -> Path:
    """The folder shiv will run, unpacked and checked (or exit saying why not)."""
    with zipfile.ZipFile(sys.argv[0]) as archive:
        env = Environment.from_json(archive.read("environment.json").decode())
        target = _bootstrap.cache_path(archive, env.root, env.build_id)
        private_root(target.parent, default=not env.root)
        refuse_unless_safe(target.parent, unsafe_root(target.parent), advice="")
        unpack(archive, env, target)
    for path in (target, target / "site-packages"):
        refuse_unless_safe(path, unsafe_folder(path))
    return target


checked_folder()
_bootstrap.bootstrap()
