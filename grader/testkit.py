"""What make test's checks share (grader/selftest.py and each lecture's bench
selftest): the suite that counts and prints, shell and mpirun helpers, fresh
work directories, and mutant trees for benches that must fail.
"""

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import launch
import mutants

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join("build", "selftest")


class Suite:
    def __init__(self):
        self.passed = self.failed = 0
        self.failures = []
        self.started = None  # when the current section began

    def section(self, title):
        """A new section; the one before it is closed with the seconds it took."""
        self.end_section()
        print(f"\n== {title}", flush=True)
        self.started = time.monotonic()

    def end_section(self):
        if self.started is not None:
            print(f"  [{time.monotonic() - self.started:.0f} s]", flush=True)
            self.started = None

    def record(self, name, ok, details=(), note=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}{('  ' + note) if note else ''}", flush=True)
        if not ok:
            for line in list(details)[:25]:
                print(f"        {line}")

    def skip(self, name, why):
        print(f"  skip  {name}: {why}", flush=True)


def sh(cmd, env=None, timeout=900):
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return res.returncode, (res.stdout + res.stderr)


def tail(text, n=20):
    return text.strip().splitlines()[-n:]


def mpirun(np_, argv, timeout=60):
    cmd = launch.mpirun_command(np_, argv)
    return launch.run(cmd, timeout=timeout)


def status_lines(d):
    return [ln for p in sorted(glob.glob(os.path.join(d, "status.r*.txt")))
            for ln in open(p, errors="replace").read().splitlines()]


@contextlib.contextmanager
def environment_kept(*keys):
    """The environment variables keys as they were before the block, whatever it set."""
    saved = {k: os.environ.get(k) for k in keys}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def mutant_tree(name, lecture, *patches, stubs=()):
    """A copy of solutions/<lecture>/*.c under build/selftest/<name>/<lecture>/, with each
    mutant grader/mutants/<lecture>/<patch>.patch applied to its file (what a bench must
    reject), and the student's stub of each exercise in stubs. Returns the tree's
    directory."""
    tree = fresh(name)
    os.makedirs(os.path.join(tree, lecture))
    for src in glob.glob(os.path.join("solutions", lecture, "*.c")):
        shutil.copy(src, os.path.join(tree, lecture))
    for patch in patches:
        m = mutants.parse(os.path.join(HERE, "mutants", lecture, patch + ".patch"))
        with open(m.target) as f:
            text = mutants.apply(f.read(), m.hunks)
        with open(os.path.join(tree, lecture, os.path.basename(m.target)), "w") as f:
            f.write(text)
    for ex in stubs:
        shutil.copy(os.path.join(lecture, ex + ".c"), os.path.join(tree, lecture))
    return tree


def run_bench(args, out, tree=None):
    """grader/bench.py with these options, its files under out (benching tree's exercise
    files instead of solutions/ when given): (exit status, stdout + stderr, seconds)."""
    cmd = ([sys.executable, os.path.join("grader", "bench.py")] + list(args) + ["--out", out] +
           (["--tree", tree] if tree else []))
    start = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr, time.monotonic() - start


def bench_results(path, problems, empty, first_run=False):
    """A bench's JSON (its first run's entry with first_run); empty, and a problem noted,
    when it is missing or incomplete."""
    try:
        with open(path) as f:
            data = json.load(f)
        return data["runs"][0] if first_run else data
    except (OSError, ValueError, KeyError, IndexError) as e:
        problems.append(f"no results: {e}")
        return empty
