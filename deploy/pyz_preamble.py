"""Run by the single file (toolcall-proxy.pyz, built by shiv) before the proxy is imported:
a file built for another Python or platform says so in one line (exit status 2) instead of
failing on an import. shiv's runtime gives `site_packages`, where it extracted the file."""

import re
import sys
import sysconfig
from pathlib import Path


def check(site_packages: Path) -> None:
    """Exit when the compiled modules are not for this interpreter (their ABI tag differs)."""
    here = sysconfig.get_config_var("SOABI") or ""
    built = {match.group(1) for path in site_packages.rglob("*.so")
             if (match := re.search(r"\.(cpython-[^.]+)\.so$", path.name))}
    if built and here not in built:
        print(f"toolcall-proxy: this file was built for {', '.join(sorted(built))}, and this "
              f"is {here or sys.version.split()[0]}: run it with that Python, or build one for "
              f"this Python with `make dist PYTHON={sys.executable}`", file=sys.stderr)
        raise SystemExit(2)


check(Path(globals()["site_packages"]))
