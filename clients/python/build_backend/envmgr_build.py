"""The PEP 517 build backend of envmgr-client, in the standard library only.

The client is two modules with no dependencies, so it needs no build tool either: with
`requires = []` in pyproject.toml, `pip install ./clients/python` and `python3 -m build` work in a
fresh venv with no network (setuptools would have to be downloaded into pip's isolated build env).
It writes a pure-Python wheel (PEP 427), an sdist (PEP 517) and an editable wheel (PEP 660).

The version is envmgr's: the VERSION file at the top of the checkout (copied into the sdist), so
`envmgr --version` and the client's package version are always the same.
"""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
NAME = "envmgr-client"
DIST = "envmgr_client"
# the client, and the adapter that runs an OSWorld agent as an envmgr stdio agent
MODULES = ["envmgr_client.py", "envmgr_osworld_agent.py", "envmgr_rl.py"]
SUMMARY = "Drive envmgr desktop envs over its HTTP API (envmgr serve), with OSWorld's DesktopEnv shape"
SDIST_FILES = ["pyproject.toml", "README.md", *MODULES, "build_backend/envmgr_build.py", "examples/agent_loop.py",
               "examples/osworld_fake_agent.py", "examples/rl_rollouts.py"]


def version():
    for path in (os.path.join(HERE, "VERSION"), os.path.join(HERE, "..", "..", "VERSION")):
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                return f.read().strip()
    raise RuntimeError("envmgr-client: no VERSION file (in the sdist, or two levels up in the checkout)")


def metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, version(), SUMMARY, readme))


def _wheel(wheel_directory, files):
    """files: {archive name: bytes}; the dist-info is added here. Returns the wheel's file name."""
    ver = version()
    info = "%s-%s.dist-info" % (DIST, ver)
    files = dict(files)
    files[info + "/METADATA"] = metadata().encode("utf-8")
    files[info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: envmgr_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode("utf-8")
    wheel = "%s-%s-py3-none-any.whl" % (DIST, ver)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            z.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for name in MODULES:
        with open(os.path.join(HERE, name), "rb") as f:
            files[name] = f.read()
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line puts the source folder on sys.path: edits show at once.
    return _wheel(wheel_directory, {DIST + ".pth": (HERE + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (DIST, version())

    def add(tar, name, data):
        entry = tarfile.TarInfo(base + "/" + name)
        entry.size, entry.mode, entry.mtime = len(data), 0o644, 0
        tar.addfile(entry, io.BytesIO(data))

    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in SDIST_FILES:
            with open(os.path.join(HERE, name), "rb") as f:
                add(tar, name, f.read())
        add(tar, "VERSION", (version() + "\n").encode("ascii"))
        add(tar, "PKG-INFO", metadata().encode("utf-8"))
    return base + ".tar.gz"
