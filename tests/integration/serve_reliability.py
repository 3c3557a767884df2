#!/usr/bin/env python3
"""serve_reliability.py — `mtplx serve` under signals and hostile clients (issue 18; docs/server.md).

signals (ASan/UBSan build): SIGHUP reopens --log-file after a rotation; SIGTERM drains (new
connects refused, a new request on an open keep-alive connection gets 503, the running stream
finishes complete, exit 0, no sanitizer report); a drain past --drain-timeout cancels the running
request and still exits 0; a second SIGINT exits at once with status 130.
hostile (optimised build, --idle-timeout 12 --max-connections 300): 200 idle connections, 20
slowloris clients sending a header byte a second, 5 half-sent bodies and a stream read one byte a
second while ordinary requests keep being answered; past the connection limit new connections wait
and are served once the idle timeout frees slots; silent connections are closed after the idle
timeout and their threads end.
Usage: python3 tests/integration/serve_reliability.py [signals|hostile ...]
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REL = os.path.join(ROOT, "build", "mtplx")
ASAN = os.path.join(ROOT, "build", "asan", "mtplx")
SAN_RE = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:")
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
ENV.pop("MTPLX_API_KEY", None)
CHAT = "/v1/chat/completions"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


class Server:
    def __init__(self, binary, tmp, name, *args):
        self.out, self.err = os.path.join(tmp, name + ".out"), os.path.join(tmp, name + ".err")
        self.p = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0", *args], env=ENV,
                                  stdout=open(self.out, "w"), stderr=open(self.err, "w"))
        deadline = time.time() + 120
        while time.time() < deadline:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(self.out).read())
            if m:
                self.port = int(m.group(1))
                return
            if self.p.poll() is not None:
                raise SystemExit("%s exited early: %s" % (name, open(self.err).read()))
            time.sleep(0.1)
        self.p.kill()
        raise SystemExit(name + " did not start")

    def wait(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def log(self, path=None):
        with open(path or self.err, errors="replace") as f:
            return f.read()


def chat_body(max_tokens, stream=False):
    return json.dumps({"model": "x", "messages": [{"role": "user", "content": "def fib(n):"}], "max_tokens": max_tokens,
                       "temperature": 0, "stream": stream})


def post(port, path, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body, {"content-type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def open_stream(port, max_tokens):
    """a streaming chat request whose first bytes have arrived: (connection, response)"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", CHAT, chat_body(max_tokens, True), {"content-type": "application/json"})
    r = c.getresponse()
    first = r.read1(65536)
    return c, r, first


def read_rest(r):
    """the rest of a stream and whether it ended properly (terminating chunk received)"""
    data = b""
    try:
        while True:
            x = r.read1(65536)
            if not x:
                return data, True
            data += x
    except (http.client.IncompleteRead, ConnectionError, ValueError):
        return data, False


def connect_refused(port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(100) == b""  # accepted by a backlog but never served counts as not refused
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    except socket.timeout:
        return False
    finally:
        s.close()


def wait_for(cond, seconds):
    """Poll cond() every 0.1 s until it holds or `seconds` pass; returns its last value."""
    deadline = time.time() + seconds
    while not cond() and time.time() < deadline:
        time.sleep(0.1)
    return cond()


def test_signals(tmp):
    # 1. SIGHUP reopens the log file after logrotate moved it
    logf = os.path.join(tmp, "serve.log")
    s = Server(ASAN, tmp, "sig", "--log-file", logf, "--drain-timeout", "60")
    st, _ = post(s.port, CHAT, chat_body(2))
    check(st == 200, "request before rotation answered")
    # the request line is written after the answer: wait for it (a loaded ASan build can take a while)
    wait_for(lambda: "chatcmpl-" in s.log(logf), 10)
    os.rename(logf, logf + ".1")
    s.p.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and not (os.path.exists(logf) and "reopened" in s.log(logf)):
        time.sleep(0.1)
    check(os.path.exists(logf) and "SIGHUP: reopened" in s.log(logf), "SIGHUP reopened --log-file")
    st, _ = post(s.port, CHAT, chat_body(2))
    wait_for(lambda: "chatcmpl-" in s.log(logf), 10)
    check(st == 200 and "chatcmpl-" in s.log(logf) and "chatcmpl-" in s.log(logf + ".1"),
          "request lines before the rotation in the old file, after it in the new one")
    # 2. SIGTERM drains: the running stream completes, new connects are refused, an open
    #    keep-alive connection gets 503, exit 0 without a sanitizer report
    ka = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    ka.request("GET", "/health")
    check(ka.getresponse().read() is not None, "keep-alive connection open")
    c, r, first = open_stream(s.port, 30)
    t0 = time.time()
    s.p.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    check(connect_refused(s.port), "new connection refused while draining")
    try:
        ka.request("POST", CHAT, chat_body(2), {"content-type": "application/json"})
        kr = ka.getresponse()
        check(kr.status == 503, "request on an open connection while draining gets 503 (got %d)" % kr.status)
        kr.read()
    except (ConnectionError, http.client.HTTPException) as e:
        check(True, "request on an open connection while draining: connection closed (%s)" % type(e).__name__)
    ka.close()
    rest, complete = read_rest(r)
    body = (first + rest).decode(errors="replace")
    check(complete and "data: [DONE]" in body and '"finish_reason":"length"' in body,
          "the stream running at SIGTERM finished complete (%.1f s after the signal)" % (time.time() - t0))
    c.close()
    rc = s.wait(60)
    log = s.log(logf)
    check(rc == 0, "exit status 0 after the drain (got %s)" % rc)
    check("drained, stopping" in log, "log says drained")
    check(not SAN_RE.search(log), "no sanitizer report after the drain")

    # 3. drain timeout: the running request is cancelled, exit 0
    s = Server(ASAN, tmp, "sigtimeout", "--drain-timeout", "1", "--quiet")
    c, r, _ = open_stream(s.port, 4000)
    t0 = time.time()
    s.p.send_signal(signal.SIGTERM)
    rc = s.wait(60)
    rest, complete = read_rest(r)
    c.close()
    log = s.log()
    check(rc == 0 and "drain timeout, cancelling 1 request" in log,
          "past --drain-timeout the running request is cancelled, exit 0 (%s after %.1f s)" % (rc, time.time() - t0))
    check(not complete, "the cancelled stream does not end as complete")
    check(not SAN_RE.search(log), "no sanitizer report after a cancelled drain")

    # 4. a second SIGINT exits at once
    s = Server(REL, tmp, "sigint", "--drain-timeout", "60", "--quiet")
    c, r, _ = open_stream(s.port, 4000)
    s.p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    t0 = time.time()
    s.p.send_signal(signal.SIGINT)
    rc = s.wait(10)
    check(rc == 130 and time.time() - t0 < 5, "a second SIGINT exits at once with 130 (got %s)" % rc)
    s.kill()
    c.close()


def test_hostile(tmp):
    s = Server(REL, tmp, "hostile", "--idle-timeout", "12", "--max-connections", "300", "--quiet")
    post(s.port, CHAT, chat_body(4), timeout=60)  # warm-up: the first request is slower
    time.sleep(0.5)
    threads0 = thread_count(s.p.pid)
    idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(200)]
    stop = threading.Event()
    loris = []

    def slowloris():
        sk = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        loris.append(sk)
        try:
            sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            while not stop.wait(1.0):
                sk.sendall(b"X")
        except OSError:
            pass

    lt = [threading.Thread(target=slowloris, daemon=True) for _ in range(20)]
    for t in lt:
        t.start()
    halfbody = []
    for _ in range(5):
        sk = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
        halfbody.append(sk)
    # a stream read one byte a second, with a small receive buffer so the server feels it
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", s.port))
    b = chat_body(200, True).encode()
    slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b))
    slow_got = []

    def slow_reader():
        try:
            while not stop.is_set():
                x = slow.recv(1)
                if not x:
                    break
                slow_got.append(x)
                time.sleep(1.0)
        except OSError:
            pass

    st = threading.Thread(target=slow_reader, daemon=True)
    st.start()
    lat = []
    for _ in range(5):
        t0 = time.time()
        code, _ = post(s.port, CHAT, chat_body(4), timeout=60)
        lat.append(time.time() - t0)
        check(code == 200, "ordinary request answered among 200 idle, 20 slowloris, 5 half bodies, 1 slow reader")
    print("     latencies: %s s" % " ".join("%.2f" % x for x in lat))
    # past the limit (226 open + 100 > 300): the extra connections wait in the listen backlog, and
    # an ordinary request is still answered once the idle timeout frees slots
    extra = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(100)]
    time.sleep(0.5)
    nt = thread_count(s.p.pid)
    check(threads0 + 200 <= nt <= threads0 + 300 + 2, "connection threads capped by --max-connections 300 (%d threads)" % nt)
    t0 = time.time()
    code, _ = post(s.port, CHAT, chat_body(4), timeout=60)
    check(code == 200 and time.time() - t0 < 30, "past the limit a new request waits, then is answered once --idle-timeout frees a slot (%.1f s)"
          % (time.time() - t0))
    for sk in extra:
        sk.close()
    # the idle timeout closes the silent ones (idle and half-sent bodies)
    time.sleep(5)
    gone = 0
    for sk in idle + halfbody:
        sk.settimeout(5)
        try:
            sk.recv(1024)  # b"" (closed) or a last error response: either way the server let go
            gone += 1
        except socket.timeout:
            pass
        except OSError:
            gone += 1
    check(gone == len(idle) + len(halfbody), "silent connections closed after --idle-timeout 12 (%d of %d)" % (gone, len(idle) + len(halfbody)))
    for sk in idle + halfbody:
        sk.close()
    code, _ = post(s.port, CHAT, chat_body(4), timeout=60)
    check(code == 200, "answered after the idle connections were closed")
    check(len(slow_got) >= 3, "the one-byte-a-second reader is still being served (%d bytes so far)" % len(slow_got))
    stop.set()
    slow.close()
    for sk in loris:
        sk.close()
    time.sleep(4)
    threads1 = thread_count(s.p.pid)
    check(threads1 <= threads0 + 2, "threads back to %d after the clients left (before: %d)" % (threads1, threads0))
    s.p.send_signal(signal.SIGTERM)
    check(s.wait(60) == 0, "exit 0 on SIGTERM after the abuse")


def thread_count(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"Threads:\s+(\d+)", f.read()).group(1))


def main():
    which = sys.argv[1:] or ["signals", "hostile"]
    for b in (REL, ASAN):
        if not os.access(b, os.X_OK):
            raise SystemExit(b + " is missing (make test builds it)")
    tmp = tempfile.mkdtemp(prefix="mtplx-rel-")
    try:
        for w in which:
            print("== " + w, flush=True)
            {"signals": test_signals, "hostile": test_hostile}[w](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
