#!/usr/bin/env python3
"""Serves a folder on 127.0.0.1 for the asset tests: `serve.py DIR PORTFILE [CERT KEY]` binds a free
port, writes it to PORTFILE, and serves HTTP (or HTTPS with CERT and KEY) until killed. Range
requests are honoured, so resumed downloads can be tested."""
import http.server
import os
import ssl
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().send_head()
        start = int(rng.split("=", 1)[1].split("-", 1)[0])
        f = open(path, "rb")
        size = os.fstat(f.fileno()).st_size
        if start >= size:
            f.close()
            self.send_error(416)
            return None
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        return f


def main():
    root, portfile = sys.argv[1], os.path.abspath(sys.argv[2])
    os.chdir(root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if len(sys.argv) > 4:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
