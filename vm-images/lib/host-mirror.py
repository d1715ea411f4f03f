#!/usr/bin/env python3
"""Print the Debian mirror the host's apt is configured with, for one suite.

Usage: host-mirror.py SUITE
Prints two lines: the mirror for SUITE (e.g. http://deb.debian.org/debian) and
the security mirror for SUITE-security (an empty line if there is none).

The guest image must come from the same mirror as the host's packages (a
sandbox may only reach an internal mirror or proxy), so the host name is never
hard-coded.  Both source formats are read: one-line entries in
/etc/apt/sources.list and sources.list.d/*.list, and deb822 stanzas
(Types:/URIs:/Suites:) in sources.list.d/*.sources.  APT_SOURCES_DIR (default
/etc/apt) points the parser at another tree, for tests.
"""
import glob
import os
import re
import sys

ETC = os.environ.get("APT_SOURCES_DIR", "/etc/apt")
URI_RE = re.compile(r"^(https?|file)://\S+$")


def one_line_entries(path):
    """deb [opts] URI SUITE [COMPONENT...] -> (types, uris, suites, comps)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if len(words) < 3:
                continue
            typ, rest = words[0], words[1:]
            if rest[0].startswith("["):  # [arch=amd64 signed-by=...]
                while rest and not rest[0].endswith("]"):
                    rest.pop(0)
                rest = rest[1:]
            if len(rest) >= 2:
                yield [typ], [rest[0]], [rest[1]], rest[2:]


def deb822_entries(path):
    """Stanzas separated by blank lines; comment lines may sit inside one."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t"):  # continuation line
                if key:
                    fields[key] += " " + line.strip()
                continue
            if ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").strip().lower() == "no":
            continue
        yield (fields.get("types", "").split(), fields.get("uris", "").split(),
               fields.get("suites", "").split(), fields.get("components", "").split())


def entries():
    files = [os.path.join(ETC, "sources.list")]
    files += sorted(glob.glob(os.path.join(ETC, "sources.list.d", "*.list")))
    for path in files:
        if os.path.isfile(path):
            yield from one_line_entries(path)
    for path in sorted(glob.glob(os.path.join(ETC, "sources.list.d", "*.sources"))):
        yield from deb822_entries(path)


def find(suite, want_main=True):
    for types, uris, suites, comps in entries():
        if "deb" in types and suite in suites and (not want_main or "main" in comps):
            for uri in uris:
                if URI_RE.match(uri):
                    return uri.rstrip("/")
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: host-mirror.py SUITE")
    suite = sys.argv[1]
    mirror = find(suite)
    if mirror is None:
        # The host runs another release: any mirror carrying its main archive
        # (a suite without a -updates/-security suffix) also carries SUITE.
        for types, uris, suites, comps in entries():
            if "deb" in types and "main" in comps and any("-" not in s for s in suites):
                mirror = next((u.rstrip("/") for u in uris if URI_RE.match(u)), None)
                if mirror:
                    print(f"host-mirror: no '{suite}' entry, using {mirror}", file=sys.stderr)
                    break
    if mirror is None:
        sys.exit(f"host-mirror: no Debian mirror found in {ETC}/sources.list[.d]")
    security = find(suite + "-security", want_main=False) or ""
    print(mirror)
    print(security)


if __name__ == "__main__":
    main()
