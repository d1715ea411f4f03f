#!/usr/bin/python3
"""A test fixture standing in for OSWorld's in-guest HTTP server (desktop_env/server/main.py, a Flask app
on port 5000 in OSWorld's Ubuntu image), for envmgr's tests of the `osworld` guest interface in CI.

It was written from OSWorld's protocol (the routes its server answers and how its host side,
desktop_env/controllers/python.py and setup.py, calls them), not from its code: Python 3's standard
library only, so it runs in the small test guest of tests/tools/make-osworld-initrd.sh (an initramfs
with a console shell, no X, no desktop).

The same as OSWorld's server: each route's path and method, its request fields (JSON bodies,
form fields, multipart uploads), its reply's fields, content type and status code, and each command's
deadline (/execute 120 s, /run_python 30 s, /run_bash_script the request's, 100 s by default). A
route answered with a string in Flask is text/html here too; an unknown route is 404, a known one
with another method 405; a JSON route given no JSON content type is 415, malformed JSON 400 (Flask's
request.json).

Where it differs:
- No window system. What needs X, AT-SPI or GNOME answers the way OSWorld's server answers when it
  fails or finds nothing, never a success it did not have: /cursor_position 500, /window_size 500
  (OSWorld's returns nothing for a class with no window, which Flask turns into a 500),
  /setup/activate_window and /setup/close_window 404 "Window NAME not found (empty results)" (the
  answer OSWorld gives when no window matches; its Linux branch runs wmctrl and says 200 whatever wmctrl
  found, which this stand-in does not imitate), /setup/open_file 500 "Failed to open ...", /wallpaper
  404, /setup/change_wallpaper 500, /accessibility 500 "Currently not implemented for platform ..."
  (what OSWorld answers where it has no accessibility tree to read), /start_recording 500 (no ffmpeg).
- /screenshot reads the guest's framebuffer, /dev/fb0, and encodes it as a PNG itself (zlib); with no
  framebuffer (a VGA text console) it answers a small valid PNG (8x8, black): a screenshot worth
  having comes from the host's VNC. No cursor is drawn in.
- /screen_size is the framebuffer's size (OSWorld's asks X), 500 without a framebuffer.
- /terminal is the text of the console (/dev/vcs of the foreground console, lines right-trimmed),
  where the test guest's shell runs; OSWorld's reads the focused GNOME Terminal through AT-SPI
  (null when none is focused, which this answers when there is no console to read).
- /setup/download_file fetches with urllib (http only: the guest has no TLS library; and no way out in
  envmgr's tests, so it fails there as OSWorld's fails without network: 500).
- Request bodies are capped (--max-body, 64 MiB by default): a larger one is 413 before it is read.
- Replies are HTTP/1.0, one request per connection; requests run in threads, as Flask's server does.
- It runs as whoever starts it (root in the test guest); OSWorld's runs as the desktop user `user`. Start
  it with HOME and the working directory at that user's home, as OSWorld's runs there: `~` and relative
  paths in task files (a `download` to "eval.sh") land there.
"""
import argparse
import json
import mimetypes
import os
import platform
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 64 << 20
EXECUTE_TIMEOUT = 120        # OSWorld's /execute deadline
RUN_PYTHON_TIMEOUT = 30      # OSWorld's /run_python deadline
BASH_DEFAULT_TIMEOUT = 100   # OSWorld's /run_bash_script default
OPEN_FILE_TIMEOUT = 1800     # how long OSWorld's /setup/open_file waits for a window
PYTHON = "/usr/bin/python3"


class Reply(Exception):
    """A finished answer raised from inside a route: status, body, content type."""

    def __init__(self, status, body, ctype="text/html; charset=utf-8", headers=None):
        super().__init__(status)
        self.status, self.body, self.ctype, self.headers = status, body, ctype, headers or {}


def json_reply(obj, status=200):
    return Reply(status, json.dumps(obj).encode() + b"\n", "application/json")


def text_reply(text, status=200):
    return Reply(status, text.encode(), "text/html; charset=utf-8")


def html_error(status, title, description):
    """Werkzeug's kind of error page (abort(), an unknown route, an exception in a view)."""
    body = ("<!doctype html>\n<html lang=en>\n<title>%d %s</title>\n<h1>%s</h1>\n<p>%s</p>\n"
            % (status, title, title, description))
    return text_reply(body, status)


def expand(path):
    return os.path.expandvars(os.path.expanduser(path))


# ---- PNG -------------------------------------------------------------------------------------------

def png_encode(width, height, rows):
    """rows: `height` byte strings of width*3 RGB bytes each."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def fb_info():
    """(width, height, bits per pixel, stride) of /dev/fb0 from sysfs, or None."""
    base = "/sys/class/graphics/fb0/"
    try:
        w, h = (int(v) for v in open(base + "virtual_size").read().strip().split(","))
        bpp = int(open(base + "bits_per_pixel").read().strip())
        stride = int(open(base + "stride").read().strip())
    except (OSError, ValueError):
        return None
    if not os.path.exists("/dev/fb0") or w <= 0 or h <= 0 or bpp not in (16, 24, 32):
        return None
    return w, h, bpp, stride


def fb_visible_size():
    """The visible part of fb0 (its mode) when sysfs says it, else its virtual size."""
    info = fb_info()
    if not info:
        return None
    w, h = info[0], info[1]
    try:
        mode = open("/sys/class/graphics/fb0/modes").read().split()[0]   # e.g. U:1024x768p-0
        mw, mh = mode.split(":")[1].split("p")[0].split("x")
        w, h = min(w, int(mw)), min(h, int(mh))
    except (OSError, ValueError, IndexError):
        pass
    return w, h


_rgb565 = None


def rgb565_table():
    global _rgb565
    if _rgb565 is None:
        _rgb565 = [bytes((((p >> 11) & 31) * 255 // 31, ((p >> 5) & 63) * 255 // 63, (p & 31) * 255 // 31))
                   for p in range(65536)]
    return _rgb565


def screenshot_png():
    info = fb_info()
    if info:
        _, _, bpp, stride = info
        w, h = fb_visible_size()
        try:
            with open("/dev/fb0", "rb") as f:
                data = f.read(stride * h)
        except OSError:
            data = b""
        if len(data) >= stride * h:
            rows = []
            for y in range(h):
                line = data[y * stride:y * stride + w * (bpp // 8)]
                if bpp == 32:      # little-endian XRGB: B G R X in memory
                    rgb = bytearray(w * 3)
                    rgb[0::3], rgb[1::3], rgb[2::3] = line[2::4], line[1::4], line[0::4]
                elif bpp == 24:    # B G R
                    rgb = bytearray(w * 3)
                    rgb[0::3], rgb[1::3], rgb[2::3] = line[2::3], line[1::3], line[0::3]
                else:              # RGB565, through a table of every pixel value
                    rgb = b"".join(map(rgb565_table().__getitem__, struct.unpack("<%dH" % w, line)))
                rows.append(bytes(rgb))
            return png_encode(w, h, rows)
    return png_encode(8, 8, [bytes(24)] * 8)


# ---- forms -----------------------------------------------------------------------------------------

def parse_form(ctype, body):
    """Fields and files of an urlencoded or multipart/form-data body: ({name: str}, {name: bytes})."""
    fields, files = {}, {}
    kind, _, params = ctype.partition(";")
    kind = kind.strip().lower()
    if kind == "application/x-www-form-urlencoded":
        for k, v in urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
            fields.setdefault(k, v)
    elif kind == "multipart/form-data":
        boundary = None
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.lower() == "boundary":
                boundary = v.strip('"')
        if not boundary:
            raise Reply(400, b"multipart body without a boundary\n", "text/plain")
        delim = b"--" + boundary.encode()
        for part in body.split(delim)[1:]:
            if part.startswith(b"--"):
                break
            part = part[2:] if part.startswith(b"\r\n") else part
            head, sep, content = part.partition(b"\r\n\r\n")
            if not sep:
                continue
            if content.endswith(b"\r\n"):
                content = content[:-2]
            name = filename = None
            for line in head.decode("utf-8", "replace").split("\r\n"):
                k, _, v = line.partition(":")
                if k.strip().lower() != "content-disposition":
                    continue
                for p in v.split(";")[1:]:
                    pk, _, pv = p.strip().partition("=")
                    pv = pv.strip().strip('"')
                    if pk.lower() == "name":
                        name = pv
                    elif pk.lower() == "filename":
                        filename = pv
            if name is None:
                continue
            if filename is not None:
                files.setdefault(name, content)
            else:
                fields.setdefault(name, content.decode("utf-8", "replace"))
    return fields, files


# ---- commands --------------------------------------------------------------------------------------

def command_of(data):
    """OSWorld's reading of {command, shell}: a string without shell is split like a shell would, and
    list items starting with ~/ are expanded."""
    shell = bool(data.get("shell", False))
    command = data.get("command", "" if shell else [])
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if isinstance(command, list):
        command = [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else a
                   for a in command]
    return command, shell


def run_command(data):
    command, shell = command_of(data)
    try:
        r = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, shell=shell,
                           text=True, timeout=EXECUTE_TIMEOUT, stdin=subprocess.DEVNULL)
    except Exception as e:   # not found, not executable, the deadline: OSWorld's 500
        raise json_reply({"status": "error", "message": str(e)}, 500)
    return r


class Handler(BaseHTTPRequestHandler):
    server_version = "osworld-standin/1"
    routes = {}

    # -- plumbing --
    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))

    def send(self, reply):
        self.send_response(reply.status)
        body = reply.body
        if isinstance(body, str):
            body = body.encode()
        self.send_header("Content-Type", reply.ctype)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        if hasattr(body, "read"):                    # a file: its size is in the headers
            self.end_headers()
            shutil.copyfileobj(body, self.wfile, 1 << 16)
            body.close()
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    def body(self):
        if hasattr(self, "_body"):
            return self._body
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise Reply(411, b"send the body with a Content-Length\n", "text/plain")
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise html_error(400, "Bad Request", "The Content-Length is not a number.")
        if n < 0 or n > self.server.max_body:
            self.close_connection = True
            raise html_error(413, "Request Entity Too Large",
                             "The request body is over %d bytes." % self.server.max_body)
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                break
            data += chunk
        self._body = data
        return data

    def json(self):
        """Flask's request.json: 415 without a JSON content type, 400 for malformed JSON."""
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
            raise html_error(415, "Unsupported Media Type",
                             "Did not attempt to load JSON data because the request Content-Type was not "
                             "'application/json'.")
        try:
            data = json.loads(self.body().decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise html_error(400, "Bad Request", "Failed to decode JSON object.")
        if not isinstance(data, dict):   # OSWorld's data.get() would raise: a 500
            raise html_error(500, "Internal Server Error", "The JSON body is not an object.")
        return data

    def form(self):
        return parse_form(self.headers.get("Content-Type", ""), self.body())

    def dispatch(self, method):
        path = urllib.parse.urlsplit(self.path).path
        route = self.routes.get(path)
        try:
            if route is None:
                raise html_error(404, "Not Found", "The requested URL was not found on the server.")
            methods, fn = route
            if method not in methods:
                raise Reply(405, b"<!doctype html>\n<title>405 Method Not Allowed</title>\n"
                            b"<h1>Method Not Allowed</h1>\n", headers={"Allow": ", ".join(sorted(methods))})
            reply = fn(self)
        except Reply as r:
            reply = r
        except Exception:
            traceback.print_exc()
            reply = html_error(500, "Internal Server Error", "The server failed on this request.")
        try:
            self.send(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_HEAD(self):
        self.dispatch("GET")


def route(path, *methods):
    def deco(fn):
        Handler.routes[path] = (set(methods), fn)
        return fn
    return deco


# ---- routes ----------------------------------------------------------------------------------------

@route("/screenshot", "GET")
def r_screenshot(h):
    return Reply(200, screenshot_png(), "image/png")


@route("/execute", "POST")
@route("/setup/execute", "POST")
def r_execute(h):
    r = run_command(h.json())
    return json_reply({"status": "success", "output": r.stdout, "error": r.stderr, "returncode": r.returncode})


@route("/execute_with_verification", "POST")
@route("/setup/execute_with_verification", "POST")
def r_execute_verified(h):
    data = h.json()
    verification = data.get("verification", {}) or {}
    max_wait = float(data.get("max_wait_time", 10))
    interval = float(data.get("check_interval", 1))
    r = run_command(data)
    out = {"status": "success", "output": r.stdout, "error": r.stderr, "returncode": r.returncode}
    if not verification:
        return json_reply(out)
    start = time.time()
    while time.time() - start < max_wait:
        ok = "window_exists" not in verification    # no window system: no window ever exists
        if ok and "command_success" in verification:
            try:
                ok = subprocess.run(verification["command_success"], shell=True, capture_output=True,
                                    timeout=5).returncode == 0
            except Exception:
                ok = False
        if ok:
            out.update(verification="passed", wait_time=time.time() - start)
            return json_reply(out)
        time.sleep(interval)
    out.update(status="verification_failed", verification="failed", wait_time=max_wait)
    return json_reply(out, 500)


@route("/run_python", "POST")
def r_run_python(h):
    code = h.json().get("code")
    if not code:
        return json_reply({"status": "error", "message": "Code not supplied!"}, 400)
    path = "/tmp/python_exec_%s.py" % uuid.uuid4().hex
    try:
        with open(path, "w") as f:
            f.write(code)
        r = subprocess.run([PYTHON, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=RUN_PYTHON_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return json_reply({"status": "error", "message": "Execution timeout: Code took too long to execute",
                           "error": "TimeoutExpired", "need_more": False, "output": None}, 500)
    except Exception as e:
        return json_reply({"status": "error", "message": "Execution error: %s" % e,
                           "error": traceback.format_exc(), "need_more": False, "output": None}, 500)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    err = r.stderr
    message = r.stdout + (("\n" + err) if r.stdout and err else err)
    if r.returncode != 0 and not err:
        err = "Process exited with code %d" % r.returncode
        message = message + "\n" + err if message else err
    return json_reply({"status": "success" if r.returncode == 0 else "error", "message": message,
                       "need_more": False, "output": r.stdout, "error": err, "return_code": r.returncode})


@route("/run_bash_script", "POST")
def r_run_bash_script(h):
    data = h.json()
    script = data.get("script")
    timeout = data.get("timeout", BASH_DEFAULT_TIMEOUT)
    workdir = data.get("working_dir")
    if not script:
        return json_reply({"status": "error", "output": "Script not supplied!", "error": "",
                           "returncode": -1}, 400)
    if workdir:
        workdir = os.path.expanduser(workdir)
        if not os.path.exists(workdir):
            return json_reply({"status": "error", "output": "Working directory does not exist: %s" % workdir,
                               "error": "", "returncode": -1}, 400)
    if "#!/bin/bash" not in script:
        script = "#!/bin/bash\n\n" + script
    fd, path = tempfile.mkstemp(suffix=".sh")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        r = subprocess.run(["/bin/bash", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, cwd=workdir or None, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return json_reply({"status": "error", "output": "Script execution timed out after %s seconds" % timeout,
                           "error": "", "returncode": -1}, 500)
    except Exception as e:
        return json_reply({"status": "error", "output": "Failed to execute script: %s" % e, "error": "",
                           "returncode": -1}, 500)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return json_reply({"status": "success" if r.returncode == 0 else "error", "output": r.stdout, "error": "",
                       "returncode": r.returncode})


@route("/file", "POST")
def r_file(h):
    fields, _ = h.form()
    if "file_path" not in fields:
        return json_reply({"error": "file_path is required"}, 400)
    path = expand(fields["file_path"])
    if not os.path.exists(path):
        return json_reply({"error": "File not found"}, 404)
    try:
        f = open(path, "rb")              # a directory: IsADirectoryError, a 500 as OSWorld's
        size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return json_reply({"error": "File not found"}, 404)
    except Exception as e:
        return json_reply({"error": "Failed to serve file: %s" % e}, 500)
    name = os.path.basename(path)
    ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if ctype.startswith("text/"):
        ctype += "; charset=utf-8"
    quoted = urllib.parse.quote(name)
    return Reply(200, f, ctype, {"Content-Length": str(size),
                                 "Content-Disposition": "attachment; filename*=UTF-8''%s" % quoted})


@route("/setup/upload", "POST")
def r_upload(h):
    fields, files = h.form()
    if "file_path" not in fields or "file_data" not in files:
        return json_reply({"error": "file_path and file_data are required"}, 400)
    path = expand(fields["file_path"])
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as f:
            f.write(files["file_data"])
        size = os.path.getsize(path)
    except Exception as e:
        try:
            os.remove(path)
        except OSError:
            pass
        return json_reply({"error": "Failed to upload file: %s" % e}, 500)
    return text_reply("File Uploaded: %d bytes" % size)


@route("/setup/download_file", "POST")
def r_download_file(h):
    data = h.json()
    url, path = data.get("url"), data.get("path")
    if not url or not path:
        return text_reply("Path or URL not supplied!", 400)
    path = expand(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    error = None
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=300) as resp, open(path, "wb") as f:
                total = int(resp.headers.get("Content-Length") or 0)
                size = 0
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > h.server.max_body:
                        raise ValueError("over %d bytes" % h.server.max_body)
                    f.write(chunk)
            if total and size != total:
                raise ValueError("Download incomplete. Expected %d bytes, got %d bytes" % (total, size))
            return text_reply("File downloaded successfully: %d bytes" % size)
        except Exception as e:
            error = e
            try:
                os.remove(path)
            except OSError:
                pass
    return text_reply("Failed to download %s. No retries left. Error: %s" % (url, error), 500)


@route("/setup/launch", "POST")
def r_launch(h):
    command, shell = command_of(h.json())
    try:
        subprocess.Popen(command, shell=shell, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except Exception as e:
        return json_reply({"status": "error", "message": str(e)}, 500)
    return text_reply("%s launched successfully" % (command if shell else " ".join(command)))


@route("/setup/open_file", "POST")
def r_open_file(h):
    path = h.json().get("path")
    if not path:
        return text_reply("Path not supplied!", 400)
    if not os.path.exists(expand(path)) and not shutil.which(path):
        return text_reply("Application/file not found: %s" % path, 404)
    # OSWorld's opens it (xdg-open, or the program) and waits up to 1800 s for its window: there are
    # no windows here, so it fails at once, as OSWorld's fails when it cannot open it.
    return text_reply("Failed to open %s. Error: no window system in this guest (OSWorld stand-in)" % path, 500)


def window_request(h):
    data = h.json()
    name = data.get("window_name")
    if not name:
        raise text_reply("window_name required", 400)
    return name


@route("/setup/activate_window", "POST")
def r_activate_window(h):
    name = window_request(h)
    return text_reply("Window %s not found (empty results)" % name, 404)


@route("/setup/close_window", "POST")
def r_close_window(h):
    name = window_request(h)
    return text_reply("Window %s not found (empty results)" % name, 404)


@route("/setup/change_wallpaper", "POST")
def r_change_wallpaper(h):
    path = h.json().get("path")
    if not path:
        return text_reply("Path not supplied!", 400)
    path = expand(path)
    if not os.path.exists(path):
        return text_reply("File not found: %s" % path, 404)
    return text_reply("Failed to change wallpaper. Error: no desktop in this guest (OSWorld stand-in)", 500)


@route("/list_directory", "POST")
def r_list_directory(h):
    data = h.json()
    if "path" not in data:
        return json_reply({"error": "Missing 'path' parameter"}, 400)
    start = data["path"]
    if not isinstance(start, str) or not os.path.isdir(start):
        return json_reply({"error": "The provided path is not a directory"}, 400)

    def tree(d):
        node = {"type": "directory", "name": os.path.basename(d), "children": []}
        try:
            for entry in os.listdir(d):
                full = os.path.join(d, entry)
                node["children"].append(tree(full) if os.path.isdir(full) else {"type": "file", "name": entry})
        except OSError as e:
            node = {"error": str(e)}
        return node
    return json_reply({"directory_tree": tree(start)})


@route("/platform", "GET")
def r_platform(h):
    return text_reply(platform.system())


@route("/screen_size", "POST")
def r_screen_size(h):
    size = fb_visible_size()
    if not size:
        return html_error(500, "Internal Server Error", "No display: this guest has no framebuffer.")
    return json_reply({"width": size[0], "height": size[1]})


@route("/window_size", "POST")
def r_window_size(h):
    fields, _ = h.form()
    if "app_class_name" not in fields:
        return json_reply({"error": "app_class_name is required"}, 400)
    return html_error(500, "Internal Server Error", "No window of class %s: this guest has no window system."
                      % fields["app_class_name"])


@route("/cursor_position", "GET")
def r_cursor_position(h):
    return html_error(500, "Internal Server Error", "No display to read the pointer from.")


@route("/desktop_path", "POST")
def r_desktop_path(h):
    path = os.path.join(os.path.expanduser("~"), "Desktop")
    if os.path.exists(path):
        return json_reply({"desktop_path": path})
    return json_reply({"error": "Unsupported operating system or desktop path not found"}, 404)


@route("/wallpaper", "POST")
def r_wallpaper(h):
    return html_error(404, "Not Found", "Wallpaper file not found")


@route("/accessibility", "GET")
def r_accessibility(h):
    # OSWorld's answer where it has no accessibility tree to read (a platform without AT-SPI, UIA or AX)
    return text_reply("Currently not implemented for platform %s." % platform.platform(), 500)


@route("/terminal", "GET")
def r_terminal(h):
    try:
        with open("/dev/vcsa", "rb") as f:
            rows, cols = f.read(4)[:2]
        with open("/dev/vcs", "rb") as f:
            text = f.read(rows * cols).decode("cp437", "replace")
    except (OSError, ValueError):
        return json_reply({"output": None, "status": "success"})
    lines = [text[i:i + cols].rstrip() for i in range(0, len(text), cols)]
    return json_reply({"output": "\n".join(lines).rstrip(), "status": "success"})


@route("/start_recording", "POST")
def r_start_recording(h):
    return json_reply({"status": "error", "message": "[Errno 2] No such file or directory: 'ffmpeg'"}, 500)


@route("/end_recording", "POST")
def r_end_recording(h):
    return json_reply({"status": "error", "message": "No recording in progress to stop."}, 400)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main():
    ap = argparse.ArgumentParser(description="A stand-in of OSWorld's in-guest server (test fixture)")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--max-body", type=int, default=MAX_BODY, help="largest request body, bytes")
    args = ap.parse_args()
    srv = Server((args.host, args.port), Handler)
    srv.max_body = args.max_body
    sys.stderr.write("osworld-standin: listening on %s:%d, cwd %s\n" % (args.host, args.port, os.getcwd()))
    srv.serve_forever()


if __name__ == "__main__":
    main()
