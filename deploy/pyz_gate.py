# The single file's __main__ (written into toolcall-proxy.pyz by deploy/pyz_finish.py): the
# first code any Python runs from the file, so in the syntax every Python 3 (and 2) parses:
# no f-string, no annotation, no __future__ import. An interpreter older than the proxy's
# gets one line saying which Python the file needs (exit status 2), never a SyntaxError
# traceback; a new enough one goes on to the guarded start (deploy/pyz_main.py, stored in
# the file as _toolcall_main.py), whose preamble then checks the build's exact version.
import sys

NEEDS = (3, 11)  # the proxy's requires-python (pyproject.toml); a test keeps them equal

if tuple(sys.version_info[:2]) < NEEDS:
    NEED = ".".join(str(part) for part in NEEDS)
    sys.stderr.write("toolcall-proxy: this file needs Python " + NEED + " or newer, and this is "
                     "Python " + sys.version.split()[0] + ": run it with python" + NEED + "\n")
    sys.exit(2)

import _toolcall_main  # noqa: E402, F401  (importing it runs the file: check, unpack, serve)
