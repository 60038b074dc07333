#!/usr/bin/env python3
"""compile_commands.json for editors (clangd, VS Code, Vim): how each C file compiles.

The Makefile runs it at every build, with its own flags and the C files it
compiles (libxt, its tests, every lecture's exercises, solutions and kit);
it writes the database to stdout:

    python3 grader/compdb.py --mpicc mpicc --flags "$(CFLAGS) $(XT_CFLAGS)" FILE.c ...

Editors do not run mpicc, so each entry names the compiler mpicc wraps and
the include paths and flags it adds (Open MPI's --showme, MPICH's -show):
that is how clangd finds mpi.h. A file also gets its lecture's include path,
as the Makefile's compile rule gives it: solutions/<lecture>/, where its kit.h
is, the lecture being the name of the file's directory (of kit/ or kit/tests/
for a kit's own files). An exercise's driver (grader/lectures/<lecture>/drivers/)
is compiled after the solution's file, as make compiles it after the exercise's. Python's standard library only: make runs it
before anything else is set up.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

import builds

# Flags that write dependency files: the build's business, not an editor's.
BUILD_ONLY = {"-MMD", "-MP", "-MD"}


def run(cmd):
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None


def wrapped(mpicc):
    """(compiler, [flags]) that mpicc runs to compile: Open MPI says it with --showme,
    MPICH with -show (-compile-info); else mpicc itself and no flags."""
    mpicc = shlex.split(mpicc)
    cc = run(mpicc + ["--showme:command"])
    flags = run(mpicc + ["--showme:compile"])
    if cc and flags is not None:
        return shlex.split(cc), shlex.split(flags)
    line = run(mpicc + ["-compile-info"]) or run(mpicc + ["-show", "-c"])
    if line:
        words = shlex.split(line)
        keep = [w for w in words[1:] if w.startswith(("-I", "-D", "-pthread", "-isystem"))]
        return words[:1], keep
    return mpicc, []


def entries(root, mpicc, flags, files):
    cc, mpi_flags = wrapped(mpicc)
    own = [f for f in shlex.split(flags) if f not in BUILD_ONLY]
    out = []
    for path in files:
        extra = builds.kit_include(root, path)
        parts = os.path.normpath(path).split(os.sep)
        if len(parts) == 5 and parts[:2] == ["grader", "lectures"] and parts[3] == "drivers":
            # A driver compiles as one unit after its exercise (the Makefile's one_unit):
            # here after the solution's.
            extra = extra + ["-include", os.path.join("solutions", parts[2], parts[4])]
        obj = os.path.join("build", os.path.splitext(path)[0] + ".o")
        out.append({"directory": root, "file": os.path.join(root, path), "output": obj,
                    "arguments": cc + mpi_flags + own + extra + ["-c", path, "-o", obj]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpicc", default="mpicc", help="the MPI compiler wrapper the build uses")
    ap.add_argument("--flags", default="", help="the flags the build gives every C file")
    ap.add_argument("--root", default=os.getcwd(), help="the repository (default: here)")
    ap.add_argument("files", nargs="*", help="the C files, relative to the root")
    args = ap.parse_args()
    json.dump(entries(os.path.abspath(args.root), args.mpicc, args.flags, args.files),
              sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
