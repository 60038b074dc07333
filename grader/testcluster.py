#!/usr/bin/env python3
"""make test-cluster: the grader across two nodes, on one Debian machine (as root).

A course that outgrows one machine grades through a hostfile (MPIRUN_ARGS) or Slurm
(XT_LAUNCHER). This stands both up here, two "nodes" of this machine, and grades through
each what a class would: every lecture's solutions (full marks), one lecture's stubs
(every test TODO) and one deadlocking mutant (its DEADLOCK report):

  hostfile  mpirun --hostfile grader/cluster/hosts: xt-node1 and xt-node2, names of this
            machine at 127.0.0.2 and .3 (added to /etc/hosts), which Open MPI does not take
            for its own, so that it starts a daemon for each through grader/cluster/rsh
            (each with its own TMPDIR); bytes between ranks over TCP only (btl tcp,self).
  slurm     Slurm from Debian's packages (slurm-wlm, munge; installed when missing):
            grader/cluster/slurm.conf.in, a controller and one slurmd per node, started
            here and stopped by their process ids; the grades run inside
            `salloc -N 2 -n 8 --overcommit`, each launch `srun --mpi=pmix -n {np}`.

It prints a table per launcher and fails unless every row is as expected and no daemon or
rank of its own is left. CI does not run it (it installs a cluster); make test checks that
its configuration files parse (check_configs).
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import launch  # noqa: E402
CONF = os.path.join(HERE, "cluster")
WORK = os.path.join(ROOT, "build", "cluster")
NODES = {"xt-node1": "127.0.0.2", "xt-node2": "127.0.0.3"}
# Lecture 7's: a rank with nothing to send skips the combine. Its lecture's stubs are graded
# too (every test TODO).
MUTANT = "gs_empty_rank_skips"
SEED = 777
SLURM_KEYS = {"ClusterName", "SlurmctldHost", "AuthType", "StateSaveLocation",
              "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "NodeName",
              "PartitionName", "SelectType", "ProctrackType"}


# ------------------------------------------------------------------ configuration

def parse_slurm_conf(text):
    """[(key, value, {other keys})] of a slurm.conf, or raises ValueError naming the line:
    every line not blank or a comment is Key=Value words."""
    entries = []
    for n, line in launch.config_lines(text):
        words = line.split()
        pairs = [w.split("=", 1) for w in words]
        if any(len(p) != 2 or not p[0] or not p[1] or not re.fullmatch(r"[A-Za-z]+", p[0])
               for p in pairs):
            raise ValueError(f"line {n}: '{line}' is not Key=Value words")
        entries.append((pairs[0][0], pairs[0][1], dict(pairs[1:])))
    return entries


def parse_hosts(text):
    """{host: slots} of an Open MPI hostfile, or raises ValueError naming the line."""
    hosts = {}
    for n, line in launch.config_lines(text):
        m = re.fullmatch(r"([A-Za-z0-9.-]+)\s+slots=(\d+)", line)
        if not m:
            raise ValueError(f"line {n}: '{line}' is not '<host> slots=<n>'")
        hosts[m[1]] = int(m[2])
    return hosts


def check_configs(conf=CONF):
    """Problems with make test-cluster's configuration files (make test)."""
    problems = []
    try:
        with open(os.path.join(conf, "slurm.conf.in")) as f:
            entries = parse_slurm_conf(f.read())
        keys = {k for k, _, _ in entries}
        nodes = [v for k, v, _ in entries if k == "NodeName"]
        if SLURM_KEYS - keys:
            problems.append(f"slurm.conf.in lacks {sorted(SLURM_KEYS - keys)}")
        if sorted(nodes) != sorted(NODES):
            problems.append(f"slurm.conf.in's nodes are {nodes}, not {sorted(NODES)}")
    except (OSError, ValueError) as e:
        problems.append(f"slurm.conf.in: {e}")
    try:
        with open(os.path.join(conf, "hosts")) as f:
            hosts = parse_hosts(f.read())
        if sorted(hosts) != sorted(NODES) or sum(hosts.values()) < 8:
            problems.append(f"hosts: {hosts}, expected {sorted(NODES)} with 8 slots in all")
    except (OSError, ValueError) as e:
        problems.append(f"hosts: {e}")
    rsh = os.path.join(conf, "rsh")
    res = subprocess.run(["sh", "-n", rsh], capture_output=True, text=True)
    if res.returncode != 0 or not os.access(rsh, os.X_OK):
        problems.append(f"rsh: not an executable shell script: {res.stderr.strip()}")
    return problems


# ------------------------------------------------------------------ the grades

def grade(args, env, out):
    """grade.py with args under env; its JSON (or None) and its output."""
    cmd = [sys.executable, os.path.join(HERE, "grade.py"), "--seed", str(SEED), "--json",
           out] + args
    start = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    try:
        with open(out) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    return data, res.stdout + res.stderr, time.monotonic() - start


def stub_tree(lecture):
    """A tree holding the stubs generated from the lecture's solutions (what a student
    starts from, whatever the student folder holds now)."""
    import stubgen
    tree = os.path.join(WORK, "stubs")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(os.path.join(tree, lecture))
    for src in glob.glob(os.path.join(ROOT, "solutions", lecture, "*")):
        with open(src) as f:
            text = f.read()
        if src.endswith((".c", ".cu")):
            text, _ = stubgen.generate(text, src)
        with open(os.path.join(tree, lecture, os.path.basename(src)), "w") as f:
            f.write(text)
    return os.path.relpath(tree, ROOT)


def mutant_tree():
    import mutants
    m = mutants.parse(glob.glob(os.path.join(HERE, "mutants", "*", MUTANT + ".patch"))[0])
    tree, _ = mutants.write_tree(m)
    return tree, m


def grade_all(route, env):
    """Every row of one launcher's table: (what, expected, got, seconds, ok)."""
    import lectures
    rows = []
    for lec in lectures.names():
        data, out, sec = grade(["--lc", str(lectures.number(lec)), "--sol"], env,
                               os.path.join(WORK, f"{route}.{lec}.json"))
        got = f"{data['score']}/{data['max']}" if data else "no report: " + out[-200:]
        rows.append((f"{lec} solutions", f"{data['max']}/{data['max']}" if data else "?", got,
                     sec, bool(data) and data["score"] == data["max"]))
    tree, m = mutant_tree()
    data, out, sec = grade(["--lc", m.lecture, "--tree", stub_tree(m.lecture)],
                           env, os.path.join(WORK, f"{route}.stubs.json"))
    verdicts = sorted({t["verdict"] for lec in data["lectures"] for t in lec["tests"]}) \
        if data else ["no report"]
    rows.append((f"{m.lecture} stubs", "every test TODO", " ".join(verdicts), sec,
                 verdicts == ["TODO"]))
    data, out, sec = grade(["--lc", m.lecture, "--tree", tree, "--ex", m.test, "--watchdog",
                            "5"], env, os.path.join(WORK, f"{route}.mutant.json"))
    tests = [t for lec in data["lectures"] for t in lec["tests"] if t["test"] == m.test] \
        if data else []
    got = tests[0]["verdict"] if tests else "no report"
    rows.append((f"mutant {MUTANT}", m.expect, got, sec, got == m.expect))
    return rows


def table(title, rows):
    print(f"\n{title}")
    print(f"  {'what':<28} {'expected':<18} {'got':<18} {'seconds':>8}")
    for what, want, got, sec, ok in rows:
        print(f"  {what:<28} {want:<18} {got[:40]:<18} {sec:8.1f}  {'ok' if ok else 'FAIL'}",
              flush=True)


# ------------------------------------------------------------------ set-up

def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def need_packages():
    """Installs slurm-wlm and munge from Debian's packages where missing (root)."""
    missing = [p for p, exe in (("slurm-wlm", "slurmctld"), ("munge", "munged"))
               if not shutil.which(exe) and not os.path.exists(f"/usr/sbin/{exe}")]
    if not missing:
        return None
    if os.geteuid() != 0:
        return f"missing {' '.join(missing)}: sudo apt-get install -y {' '.join(missing)}"
    print(f"installing {' '.join(missing)} (apt-get)", flush=True)
    res = run(["apt-get", "install", "-y", "--no-install-recommends"] + missing,
              env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return None if res.returncode == 0 else f"apt-get install {missing} failed:\n{res.stdout}"


def need_host_names():
    """xt-node1 and xt-node2 in /etc/hosts (added when missing)."""
    with open("/etc/hosts") as f:
        text = f.read()
    absent = [(n, a) for n, a in NODES.items() if not re.search(rf"\s{n}(\s|$)", text)]
    if absent:
        with open("/etc/hosts", "a") as f:
            f.write("".join(f"{a} {n}  # make test-cluster\n" for n, a in absent))
        print(f"added to /etc/hosts: {', '.join(n for n, _ in absent)}", flush=True)


def pid_of(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def stop(pids):
    for pid in pids:
        if pid and alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(p and alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


class Slurm:
    """The two-node Slurm of slurm.conf.in, started and stopped by process id."""

    def __init__(self):
        self.conf = os.path.join(WORK, "slurm.conf")
        # The daemons' pid files, read when they are stopped: a daemon writes its own after
        # it has left the command that started it.
        self.pid_files = [os.path.join(WORK, "slurmctld.pid")] + [
            os.path.join(WORK, f"slurmd.{n}.pid") for n in NODES]
        self.pids = []
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        shutil.rmtree(os.path.join(WORK, "state"), ignore_errors=True)
        for d in ["state", "log"] + [os.path.join(k, n) for k in ("spool", "tmp")
                                      for n in NODES]:
            os.makedirs(os.path.join(WORK, d), exist_ok=True)
        with open(os.path.join(CONF, "slurm.conf.in")) as f:
            text = f.read().replace("@DIR@", WORK).replace("@HOST@", socket.gethostname())
        with open(self.conf, "w") as f:
            f.write(text)
        if run(["sh", "-c", "munge -n | unmunge"]).returncode != 0:
            os.makedirs("/run/munge", exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"])
            self.pid_files.append("/run/munge/munged.pid")
        for path in self.pid_files:
            if os.path.exists(path) and path.startswith(WORK):
                os.remove(path)
        run(["slurmctld", "-f", self.conf], env=self.env)
        for n in NODES:
            run(["slurmd", "-f", self.conf, "-N", n], env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            res = run(["sinfo", "-h", "-o", "%T %D"], env=self.env)
            if res.stdout.split()[:2] == ["idle", "2"]:
                return None
            time.sleep(0.5)
        return "Slurm's nodes did not come up idle: " + run(
            ["sinfo"], env=self.env).stdout + "\n".join(
            tail(p) for p in glob.glob(os.path.join(WORK, "log", "*.log")))

    def stop(self):
        self.pids = [p for p in map(pid_of, self.pid_files) if p]
        stop(self.pids)


def tail(path, n=5):
    with open(path, errors="replace") as f:
        return f"{path}:\n" + "".join(f.readlines()[-n:])


def leftovers():
    """Processes of this run still alive: ranks, Open MPI daemons, Slurm's steps."""
    res = run(["pgrep", "-af", r"build/(resident|lc[0-9]|mutants|cluster)|orted|slurmstepd"])
    return [ln for ln in res.stdout.splitlines() if "pgrep" not in ln]


def hostfile_env():
    env = dict(os.environ, XT_CLUSTER_TMP=os.path.join(WORK, "tmp"))
    env["MPIRUN_ARGS"] = (f"--hostfile {os.path.join(CONF, 'hosts')} --mca plm_rsh_agent "
                          f"{os.path.join(CONF, 'rsh')} --mca btl tcp,self --map-by node")
    return env


def slurm_env():
    return dict(os.environ, XT_LAUNCHER="srun --mpi=pmix -n {np}", OMPI_MCA_btl="tcp,self")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inside", help="run the grades of one route here (inside salloc)")
    args = ap.parse_args(argv)
    os.makedirs(WORK, exist_ok=True)
    if args.inside:
        rows = grade_all(args.inside, slurm_env())
        with open(os.path.join(WORK, "slurm.rows.json"), "w") as f:
            json.dump(rows, f)
        return 0
    problems = check_configs()
    if problems:
        print("make test-cluster: " + "; ".join(problems), file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("make test-cluster sets up host names and Slurm's daemons: run it as root",
              file=sys.stderr)
        return 2
    why = need_packages()
    if why:
        print(f"make test-cluster: {why}", file=sys.stderr)
        return 2
    need_host_names()
    subprocess.run(["make", "-s", "--no-print-directory"], cwd=ROOT, check=False)
    failed = 0

    rows = grade_all("hostfile", hostfile_env())
    table("hostfile: mpirun --hostfile grader/cluster/hosts (2 nodes, TCP)", rows)
    failed += sum(not r[4] for r in rows)
    left = leftovers()
    if left:
        print("  left running after the hostfile route:\n    " + "\n    ".join(left))
        failed += 1

    slurm = Slurm()
    try:
        why = slurm.start()
        if why:
            print(f"\nslurm: {why}")
            failed += 1
        else:
            out = os.path.join(WORK, "slurm.rows.json")
            if os.path.exists(out):
                os.remove(out)
            res = subprocess.run(["salloc", "-N", "2", "-n", "8", "--overcommit",
                                  sys.executable, os.path.abspath(__file__), "--inside",
                                  "slurm"], cwd=ROOT, env=slurm.env, capture_output=True,
                                 text=True, timeout=3600)
            try:
                with open(out) as f:
                    rows = [tuple(r) for r in json.load(f)]
            except (OSError, ValueError):
                rows = [("salloc", "the grades", f"none: {res.stderr[-300:]}", 0.0, False)]
            table("slurm: salloc -N 2 -n 8 --overcommit; srun --mpi=pmix -n {np} (2 nodes, "
                  "TCP)", rows)
            failed += sum(not r[4] for r in rows)
    finally:
        slurm.stop()
    left = leftovers() + [f"pid {p}" for p in slurm.pids if p and alive(p)]
    if left:
        print("  left running after the Slurm route:\n    " + "\n    ".join(left))
        failed += 1
    print(f"\nmake test-cluster: {failed} failed" if failed else
          "\nmake test-cluster: every row as expected; nothing of its own left running")
    return 1 if failed else 0


if __name__ == "__main__":
    import needs
    needs.numpy()
    sys.exit(main())
