"""P13: ``session.run("true")`` through the SDK against one bare ``http.client`` request of the same route.

Run from sdk/python: ``python3 bench/p13.py [-n ROUNDS]``. It starts a daemon
built from the repository (or ``CONCH_BIN``), then alternates batches of the
two in the same process and prints the medians, p99 and the ratio (target
≤ 1.3×).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import sys
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.daemon import Daemon  # noqa: E402


def quantile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000, help="calls of each kind (default 2000)")
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()
    d = Daemon()
    try:
        sandbox = d.sandbox()
        session = sandbox.process.create_session()
        u = urlsplit(d.url)
        conn = http.client.HTTPConnection(u.hostname, u.port)
        path = f"/v1/sessions/{session.id}/commands/run"
        headers = {"Authorization": f"Bearer {d.token}", "Content-Type": "application/json"}
        body = json.dumps({"cmd": "true", "timeout": 30000})

        def bare() -> None:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            out = json.loads(r.read())
            assert r.status == 200 and out["exitCode"] == 0, out

        def sdk() -> None:
            r = session.run("true")
            assert r.exit_code == 0, r

        for f in (bare, sdk):
            for _ in range(50):
                f()
        times = {"sdk": [], "bare": []}
        done = 0
        while done < args.n:
            for name, f in (("bare", bare), ("sdk", sdk)):
                for _ in range(args.batch):
                    t0 = time.perf_counter()
                    f()
                    times[name].append(time.perf_counter() - t0)
            done += args.batch
        s, b = statistics.median(times["sdk"]), statistics.median(times["bare"])
        ratio = s / b
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"load {os.getloadavg()[0]:.2f}")
        print("metric  value                      baseline                    ratio   target   met")
        print(f"P13     {s*1e6:.0f}µs (p99 {quantile(times['sdk'], .99)*1e6:.0f}µs)   "
              f"{b*1e6:.0f}µs (p99 {quantile(times['bare'], .99)*1e6:.0f}µs)   {ratio:.3f}×  ≤ 1.3×   "
              f"{'yes' if ratio <= 1.3 else 'no'}")
        session.delete()
        sandbox.close()
        conn.close()
    finally:
        d.stop()


if __name__ == "__main__":
    main()
