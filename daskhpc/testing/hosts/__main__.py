"""``python -m daskhpc.testing.hosts``: a virtual cluster from the shell.

``run`` brings up hosts with Dask on them, runs one command on host 0 while faults are
applied on a clock, and removes everything; ``up``/``down``/``status``/``exec`` keep a
cluster between commands.

Examples
--------
::

    python -m daskhpc.testing.hosts run --hosts 4 --rate 100mbit --cut 2@10 -- \\
        daskhpc run cpals TENSOR --rank 8 --parts 3 --scheduler-file {scheduler_file}
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from daskhpc.testing import hosts

FAULTS = ("cut", "restore", "kill", "shape")


def _fault(kind: str):
    """``I@S`` (``I@S=RATE`` for shape) as (seconds, kind, host, rate)."""
    pattern = r"(\d+)@([0-9.]+)" + (r"=(\S+)" if kind == "shape" else "")

    def parse(text: str):
        m = re.fullmatch(pattern, text)
        if not m:
            form = "I@S=RATE" if kind == "shape" else "I@S"
            raise argparse.ArgumentTypeError(f"--{kind} {text!r}: write it as {form}, "
                                             "host I at S seconds")
        rate = m.group(3) if kind == "shape" else None
        if rate is not None:
            try:
                hosts.parse_rate(rate)
            except ValueError as e:
                raise argparse.ArgumentTypeError(str(e)) from None
        return float(m.group(2)), kind, int(m.group(1)), rate
    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m daskhpc.testing.hosts",
                                description="A cluster of hosts on this machine: network "
                                            "namespaces on a bridge, links shaped with tc.")
    sub = p.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("run", help="hosts with Dask, COMMAND on host 0, faults on a clock")
    up = sub.add_parser("up", help="bring up hosts that stay until `down`")
    for q in (run, up):
        q.add_argument("--hosts", type=int, required=True, metavar="N",
                       help="hosts; with Dask, the scheduler (and COMMAND) on host 0 and "
                            "a worker on each other host")
        q.add_argument("--rate", metavar="R", help="every link's rate, e.g. 100mbit, 1gbit")
        q.add_argument("--prefix", help="names start with it (default: dh<pid><letter>)")
    for kind in FAULTS:
        run.add_argument(f"--{kind}", type=_fault(kind), action="append", default=[],
                         dest="faults", metavar="I@S=R" if kind == "shape" else "I@S",
                         help=f"{kind} host I's link S seconds after COMMAND started"
                         if kind != "kill" else "kill every process of host I at S s")
    run.add_argument("--logs", metavar="DIR", help="keep the Dask processes' logs here")
    run.add_argument("command", nargs=argparse.REMAINDER,
                     help="-- COMMAND ...: every {scheduler_file} is replaced")
    up.add_argument("--dask", action="store_true",
                    help="also a scheduler on host 0 and a worker on each other host")
    down = sub.add_parser("down", help="remove a cluster (--all: every one up)")
    down.add_argument("--prefix")
    down.add_argument("--all", action="store_true")
    sub.add_parser("status", help="the clusters up on this machine")
    ex = sub.add_parser("exec", help="run COMMAND on host I of a cluster that is up")
    ex.add_argument("--prefix", required=True)
    ex.add_argument("host", type=int)
    ex.add_argument("command", nargs=argparse.REMAINDER)
    wait = sub.add_parser("_wait")       # inside host 0: wait for the workers
    wait.add_argument("scheduler_file")
    wait.add_argument("workers", type=int)
    wait.add_argument("timeout", type=float)
    return p


def main(argv: list[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    if opts.verb == "_wait":
        hosts.wait_for_workers(opts.scheduler_file, opts.workers, opts.timeout)
        return 0
    if opts.verb == "status":
        for rec in hosts.clusters():
            owner = "kept" if rec.get("pid") is None else (
                f"pid {rec['pid']}" + ("" if rec["alive"] else " (dead: stale)"))
            print(f"{rec['prefix']}: {rec['hosts']} hosts on {rec['subnet']}, {owner}"
                  + (f", scheduler file {rec['scheduler_file']}"
                     if rec.get("scheduler_file") else ""))
        return 0
    why = hosts.unavailable()
    if why:
        print(f"daskhpc.testing.hosts: {why}", file=sys.stderr)
        return 2
    if opts.verb == "down":
        if not (opts.all or opts.prefix):
            print("daskhpc.testing.hosts: down needs --prefix P or --all", file=sys.stderr)
            return 2
        names = [r["prefix"] for r in hosts.clusters()] if opts.all else [opts.prefix]
        for name in names:
            if hosts.cleanup(name):
                print(f"removed {name}")
        return 0
    if opts.verb == "exec":
        vc = hosts.load(opts.prefix)
        rec = next(r for r in hosts.clusters() if r["prefix"] == opts.prefix)
        cmd = _command(opts.command, rec.get("scheduler_file") or "")
        return vc.run(opts.host, cmd).returncode
    if opts.verb == "up":
        return _up(opts)
    return _run(opts)


def _command(words: list[str], scheduler_file: str) -> list[str]:
    words = words[1:] if words[:1] == ["--"] else words
    if not words:
        raise SystemExit("daskhpc.testing.hosts: no COMMAND after --")
    return [w.replace("{scheduler_file}", scheduler_file) for w in words]


def _up(opts) -> int:
    vc = hosts.make(opts.hosts, opts.rate, opts.prefix, owned=False)
    print(f"{vc.prefix}: {len(vc)} hosts {', '.join(vc.addresses)} on {vc.subnet} "
          f"(interface {vc.interface}); remove with: python -m daskhpc.testing.hosts "
          f"down --prefix {vc.prefix}")
    if opts.dask:
        directory = tempfile.mkdtemp(prefix=f"{vc.prefix}-dask-")
        try:
            sf = vc.start_dask(directory)
        except BaseException:
            vc.close()
            raise
        hosts.note(vc.prefix, scheduler_file=sf)
        print(f"scheduler file {sf}: run on host 0 with: python -m daskhpc.testing.hosts "
              f"exec --prefix {vc.prefix} 0 -- daskhpc run ... --scheduler-file "
              "{scheduler_file}")
    return 0


def _run(opts) -> int:
    command = opts.command            # checked before anything is made
    _command(command, "")

    def terminate(signum, frame):     # a TERM runs the clean-up as an interrupt would
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    directory = opts.logs or tempfile.mkdtemp(prefix="daskhpc-hosts-")
    with hosts.virtual_cluster(opts.hosts, opts.rate, opts.prefix) as vc:
        try:
            sf = vc.start_dask(directory)
            proc = vc.popen(0, _command(command, sf))
            stop = threading.Event()
            t0 = time.monotonic()
            injector = threading.Thread(target=_inject, args=(vc, opts.faults, t0, stop),
                                        daemon=True)
            injector.start()
            try:
                status = proc.wait()
            finally:
                stop.set()
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
            return status
        finally:
            if not opts.logs:
                shutil.rmtree(directory, ignore_errors=True)


def _inject(vc, faults, t0: float, stop: threading.Event) -> None:
    """Apply each fault at its time after ``t0`` (until ``stop``)."""
    for at, kind, host, rate in sorted(faults, key=lambda f: f[0]):
        if stop.wait(max(t0 + at - time.monotonic(), 0.0)):
            return
        if not 0 <= host < len(vc):
            print(f"daskhpc.testing.hosts: no host {host} to {kind}", file=sys.stderr)
            continue
        if kind == "shape":
            vc.shape(host, rate)
        else:
            getattr(vc, kind)(host)
        what = f"shaped to {rate}" if kind == "shape" else {
            "cut": "cut off", "restore": "restored", "kill": "killed"}[kind]
        print(f"daskhpc.testing.hosts: host {host} ({vc.addresses[host]}) {what} at "
              f"{time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
