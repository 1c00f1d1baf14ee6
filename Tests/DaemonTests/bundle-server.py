#!/usr/bin/env python3
"""An HTTP/1.1 server for the update tests (UpdateTests): serves one file,
honours Range (206), and misbehaves on request. Prints its port, then one
line per request ("GET /x range=bytes=N-") on stdout.

  bundle-server.py FILE [--drop-after N] [--no-range] [--rate BYTES_PER_S] [--lie-length N]

--drop-after N  the first GET closes the connection after N bytes of body
--no-range      ignores Range (always 200 with the whole file)
--rate R        sends at most R bytes a second (to cut power mid-download)
--lie-length N  announces Content-Length N (HEAD and GET) whatever the file
"""
import http.server
import os
import sys
import time

args = sys.argv[1:]
path = args.pop(0)
opts = {}
while args:
    k = args.pop(0)
    opts[k] = True if k == "--no-range" else int(args.pop(0))
state = {"dropped": False}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _head(self, code, length, start=0, total=0):
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        if code == 206:
            self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
        self.end_headers()

    def do_HEAD(self):
        print(f"HEAD {self.path}", flush=True)
        if self.path != "/" + os.path.basename(path):
            self.send_error(404)
            return
        self._head(200, opts.get("--lie-length", os.path.getsize(path)))

    def do_GET(self):
        rng = self.headers.get("Range")
        print(f"GET {self.path} range={rng}", flush=True)
        if self.path != "/" + os.path.basename(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        total = len(data)
        start = 0
        if rng and not opts.get("--no-range") and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= total:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{total}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._head(206, total - start, start, total)
        else:
            self._head(200, opts.get("--lie-length", total))
        body = data[start:]
        limit = None
        if "--drop-after" in opts and not state["dropped"]:
            state["dropped"] = True
            limit = opts["--drop-after"]
        rate = opts.get("--rate")
        sent = 0
        step = 16384
        while sent < len(body):
            n = step if limit is None else min(step, limit - sent)
            if n <= 0:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body[sent:sent + n])
            sent += n
            if rate:
                time.sleep(n / rate)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
