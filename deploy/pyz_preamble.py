"""Run by the single file (toolcall-proxy.pyz, built by shiv) before the proxy is imported:
a file built for another Python or platform says so in one line (exit status 2) instead of
failing on an import. shiv's runtime gives `site_packages`, where it extracted the file
(a folder `deploy/pyz_main.py` has checked first). Parsable by Python 3.7 (no walrus, no
f-string `=`), so that an old Python gets the line too, not a SyntaxError."""

import re
import sys
import sysconfig
from pathlib import Path


def check(site_packages: Path) -> None:
    """Exit when the compiled modules are not for this interpreter (their ABI tag differs)."""
    here = sysconfig.get_config_var("SOABI") or ""
    built = set()
    for path in site_packages.rglob("*.so"):
        match = re.search(r"\.(cpython-[^.]+)\.so$", path.name)
        if match:
            built.add(match.group(1))
    if built and here not in built:
        this = here or sys.version.split()[0]
        print(f"toolcall-proxy: this file was built for {', '.join(sorted(built))}, and this "
              f"is {this}: run it with that Python, or build one for this Python with "
              f"`make dist PYTHON={sys.executable}`", file=sys.stderr)
        raise SystemExit(2)


check(Path(globals()["site_packages"]))
