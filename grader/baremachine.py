"""make test's proof that the README's two commands start on a machine with only git and make.

The README promises that a fresh Debian needs git and make, and that `make grade LC=1`
and `make test` install the rest themselves (grader/setup.sh). That holds only while
nothing runs Python, a compiler wrapper or anything else setup.sh installs before
setup.sh has run: make reads the whole Makefile (and remakes any makefile it includes)
before the first recipe. So, in a copy of the tree as a fresh clone has it (no build/):

  1. make reads the Makefile, and `make -n` prints each entry point's recipe, with a
     PATH of a shell, make, coreutils, findutils, sed, grep, git and the C compiler,
     plus traps: python3, mpicc, mpirun and every program setup.sh installs, scripts
     that note that they ran. None may run, nothing may be missing, make says nothing.
  2. Every entry point (make grade, test, deps, demo, hint, drill, bench...) with that
     PATH (no traps) and XT_NO_INSTALL=1, as a user without root: setup.sh's three
     lines (the packages, the one apt-get command), and nothing above them; a plain
     `make` says that mpicc is missing and what installs it.
     Without a compiler (the README's machine has none), the one command still names
     what only a compiler could look for (OpenBLAS, Open MPI's headers).
  3. setup.sh looks for each tool as the package it installs provides it (dpkg says
     which package owns the command it found), pyflakes and NumPy as modules.
  4. .ci/run installs only what the README says a machine needs, then runs the
     README's first command, and names no package of its own.

Each check has a negative control: the Makefile with an include that Python writes
(what the tree had before), a tool looked for under a name its package does not
provide, a CI script that installs Python first.
"""

import glob
import os
import re
import shutil
import subprocess

import throwaway
from testkit import fresh

# What a machine the README describes has: a shell and Debian's essential tools, make,
# git and a C compiler. Looked up on this machine's PATH; the missing ones are left out.
ALLOWED = ("sh", "bash", "dash", "make", "git", "cc", "gcc", "cpp",
           "env", "cat", "cp", "mv", "rm", "rmdir", "mkdir", "ls", "ln", "touch", "chmod",
           "date", "id", "uname", "sort", "uniq", "tr", "cut", "head", "tail", "wc", "tee",
           "dirname", "basename", "readlink", "realpath", "mktemp", "sleep", "true", "false",
           "test", "[", "printf", "echo", "expr", "seq", "stat", "comm", "join", "paste",
           "sed", "grep", "egrep", "awk", "mawk", "find", "xargs", "diff", "cmp", "tar",
           "gzip", "hostname", "which")

# The goals a user types; each must parse and print its recipe without running anything.
ENTRY_POINTS = (["grade", "LC=1"], ["test"], ["deps"], ["demo", "EX=p2p", "NP=2"],
                ["hint", "EX=p2p"], ["drill", "EX=p2p"], ["bench", "LC=1"],
                ["debug", "EX=p2p"], ["lectures"], ["drills"], ["readme"], ["stubs"])

# The Makefile as it was: an included makefile that Python writes, remade while make
# reads the Makefile, before any recipe (the negative control of checks 1 and 2).
PARSE_TIME_PYTHON = """
include build/parse-time.mk
build/parse-time.mk:
\t@mkdir -p build && python3 -c 'print("PARSE_TIME := 1")' > $@
"""


def setup_pairs(setup_text):
    """(command, package) for each `need COMMAND PACKAGE` of grader/setup.sh."""
    return re.findall(r"^\s*need\s+(\S+)\s+(\S+)\s*(?:#.*)?$", setup_text, re.M)


def trap_names(setup_text):
    """What setup.sh installs, as commands: each it looks for, every python3 it tries,
    pyflakes under both names; what a machine with only git and make lacks."""
    names = {cmd for cmd, _ in setup_pairs(setup_text)} - set(ALLOWED)
    names |= {"python", "python3", "pyflakes", "pyflakes3", "pip", "pip3"}
    names |= {f"python3.{minor}" for minor in range(6, 20)}
    return sorted(names)


def bare_path(directory, traps=(), log=None):
    """A directory to be the whole PATH: links to ALLOWED as this machine has them, and
    each of traps as a script that appends its name and arguments to log and fails."""
    os.makedirs(directory, exist_ok=True)
    for name in ALLOWED:
        real = shutil.which(name)
        if real:
            os.symlink(os.path.realpath(real), os.path.join(directory, name))
    for name in traps:
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexit 127\n')
        os.chmod(path, 0o755)
    return directory


def bare_env(path, **extra):
    """An environment with nothing of this session's: no MAKEFLAGS from the make that
    runs make test, no python of its own (XT_PYTHON), only PATH and the basics."""
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LC_ALL": "C",
           "TERM": "dumb"}
    env.update(extra)
    return env


def make(root, goal, env):
    res = subprocess.run(["make", "--no-print-directory"] + goal, cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    return res.returncode, res.stdout, res.stderr


def parse_problems(root, env, log):
    """What `make -n` of each entry point did that a bare machine would not survive:
    a trap that ran, a status other than 0, anything on stderr."""
    problems = []
    for goal in ENTRY_POINTS:
        if os.path.exists(log):
            os.remove(log)
        rc, _, err = make(root, ["-n"] + goal, env)
        what = "make -n " + " ".join(goal)
        if os.path.exists(log):
            with open(log) as f:
                ran = [ln.strip() for ln in f if ln.strip()]
            problems.append(f"{what}: ran {'; '.join(ran)}, which setup.sh installs")
        if rc != 0:
            problems.append(f"{what}: exit status {rc}")
        for line in err.strip().splitlines()[:3]:
            problems.append(f"{what}: said {line.strip()!r}")
    return problems


def setup_message_problems(goal, rc, out):
    """Problems with a failed entry point's output: it must be setup.sh's three lines
    (the packages, 'install them with:', the apt-get command naming the same ones),
    and after them only make's own line that the recipe failed."""
    what = "make " + " ".join(goal)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if lines and re.match(r"make: \*\*\* \[.*\] Error \d+$", lines[-1]):
        lines = lines[:-1]
    if rc == 0:
        return [f"{what}: exit status 0 with tools missing"]
    m = (re.fullmatch(r"setup: missing packages: (\S.*)", lines[0]) if len(lines) == 3
         else None)
    want = m and ["install them with:",
                  f"    sudo apt-get install -y --no-install-recommends {m.group(1)}"]
    if not m or lines[1:] != want:
        return [f"{what}: printed, rather than setup.sh's three lines:"] + \
               [f"  | {ln}" for ln in lines[:6]]
    return []


def entry_problems(root, env):
    problems = []
    for goal in ENTRY_POINTS:
        rc, out, err = make(root, goal, env)
        problems += setup_message_problems(goal, rc, out + err)
    rc, out, err = make(root, [], env)
    text = (out + err).strip()
    if rc == 0 or "mpicc is not installed" not in text or "make deps" not in text \
            or len(text.splitlines()) != 1:
        problems.append(f"make (a plain build): {text!r}, not one line naming make deps")
    return problems


# What setup.sh can only look for with a compiler: named at once when there is none, or the
# first install (gcc) is followed by a second command.
NEEDS_A_COMPILER = ("libopenblas-dev", "libopenmpi-dev")
# setup.sh's line that names OpenBLAS without a compiler (the negative control drops it).
OPENBLAS_UNCHECKED = '    else\n        missing="$missing libopenblas-dev"\n'


def compilerless_problems(goal, rc, out):
    """Without a compiler, the one install command must name what only a compiler could
    check: installing gcc alone would leave those for a second command."""
    m = re.search(r"^setup: missing packages: (.*)$", out, re.M)
    named = m.group(1).split() if m else []
    lost = [p for p in NEEDS_A_COMPILER if p not in named]
    if rc == 0 or lost:
        return [f"{goal} without a compiler named {named or 'nothing'}, not "
                f"{', '.join(lost)}: a second install command would follow the first"]
    return []


def dpkg_owner(path):
    """The packages that own path (dpkg -S), or None."""
    try:
        res = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    if res.returncode != 0:
        return None
    owners = res.stdout.splitlines()[0].rsplit(": ", 1)[0]
    return {o.strip().split(":")[0] for o in owners.split(",")}


def alternative_registrants(link):
    """The packages whose install script makes link one of Debian's alternatives
    (`update-alternatives --install link ...`): they provide the command of that name,
    whoever owns the file it points to (openmpi-bin's mpicc is mpicc.openmpi)."""
    pattern = re.compile(r"--install\s+" + re.escape(link) + r"\s")
    out = set()
    for script in glob.glob("/var/lib/dpkg/info/*.postinst"):
        try:
            with open(script, errors="replace") as f:
                if pattern.search(f.read()):
                    out.add(os.path.basename(script)[:-len(".postinst")].split(":")[0])
        except OSError:
            continue
    return out


def owner_of_command(cmd):
    """The packages that provide cmd as found on PATH: those that register it as an
    alternative, else the owner of the file, or of what it links to."""
    path = shutil.which(cmd)
    if path is None:
        return None, f"{cmd} is not on PATH"
    if os.path.islink(path) and os.readlink(path).startswith("/etc/alternatives/"):
        owner = alternative_registrants(path)
        if owner:
            return owner, None
    seen = []
    p = path
    for _ in range(8):
        seen.append(p)
        owner = dpkg_owner(p)
        if owner:
            return owner, None
        if not os.path.islink(p):
            break
        target = os.readlink(p)
        p = target if os.path.isabs(target) else os.path.join(os.path.dirname(p), target)
    owner = dpkg_owner(os.path.realpath(path))
    return owner, None if owner else f"no package owns {' -> '.join(seen)}"


def package_problems(pairs, modules):
    """Each (command, package) of setup.sh, and each (python, module, package): the
    package setup.sh would install for it is the one that provides it here."""
    problems = []
    for cmd, pkg in pairs:
        owner, why = owner_of_command(cmd)
        if owner is None:
            problems.append(f"{cmd}: {why}")
        elif pkg not in owner:
            problems.append(f"setup.sh looks for {cmd} and installs {pkg}, but "
                            f"{shutil.which(cmd)} comes from {', '.join(sorted(owner))}")
    for py, module, pkg in modules:
        res = subprocess.run([py, "-c", f"import {module}; print({module}.__file__)"],
                             capture_output=True, text=True, timeout=60)
        owner = dpkg_owner(res.stdout.strip()) if res.returncode == 0 else None
        if owner is None or pkg not in owner:
            problems.append(f"{py}'s {module} ({res.stdout.strip() or 'not importable'}) "
                            f"comes from {', '.join(sorted(owner or ['no package']))}, not {pkg}")
    return problems


def ci_problems(ci_text, readme_text):
    """.ci/run takes the tree as a new user does: before the README's first command it
    installs only what the README says a machine needs (git, make); it installs nothing
    after, and runs both of the README's commands."""
    block = re.search(r"## The two commands.*?```sh\n(.*?)```", readme_text, re.S)
    commands = [ln.split("#")[0].strip() for ln in (block.group(1) if block else "").splitlines()
                if ln.strip()]
    if len(commands) < 2:
        return ["the README's section 'The two commands' has no block of two commands"]
    first, second = commands[0], commands[1]
    problems = []
    seen_first = False
    ran = []
    for raw in ci_text.splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        m = re.search(r"apt-get\s+install\s+(.*)", line)
        if m:
            pkgs = [w for w in m.group(1).replace("\\", " ").split() if not w.startswith("-")]
            if seen_first:
                problems.append(f".ci/run installs {' '.join(pkgs)} after {first!r}: "
                                "grader/setup.sh's list is the one list")
            extra = [p for p in pkgs if p not in ("git", "make")]
            if extra and not seen_first:
                problems.append(f".ci/run installs {' '.join(extra)} before {first!r}, "
                                "beyond the README's git and make")
        for cmd in (first, second):
            if re.search(r"(^|[\s;&|({])" + re.escape(cmd) + r"(\s|$|[;&|)}])", line):
                ran.append(cmd)
                seen_first = seen_first or cmd == first
    if ran[:1] != [first] or second not in ran:
        problems.append(f".ci/run runs {ran}, not {first!r} then {second!r}")
    return problems


NOTE_MARK = "/noted/python3"  # a python no full check could print


def note_problems(work):
    """What setup.sh's note (build/setup.txt) does wrong: answering when it must not, or
    checking in full when the note answers. The note's python is NOTE_MARK, so that its
    answer is told from a full check's (which, with XT_NO_INSTALL=1, prints a real
    python or fails)."""
    root = os.path.join(work, "note")
    os.makedirs(os.path.join(root, "grader"), exist_ok=True)
    os.makedirs(os.path.join(root, "build"), exist_ok=True)
    shutil.copy("grader/setup.sh", os.path.join(root, "grader", "setup.sh"))
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "XT_NO_INSTALL": "1"}
    problems = []

    def answer(context, test_level, files, args=()):
        with open(os.path.join(root, "build", "setup.txt"), "w") as f:
            f.write(f"{context}\ntest={test_level}\n{NOTE_MARK}\n" +
                    "".join(p + "\n" for p in files))
        res = subprocess.run(["/bin/sh", "grader/setup.sh", *args], cwd=root, env=env,
                             capture_output=True, text=True, timeout=120)
        return res.stdout.strip() == NOTE_MARK

    here = f"path={path} xt_python="
    if not answer(here, 0, ["/bin/sh"]):
        problems.append("a note whose files are all there did not answer")
    if not answer(here, 1, ["/bin/sh"]):
        problems.append("a note of --test did not answer a plain call")
    if answer(here, 0, ["/bin/sh", "/no/such/file"]):
        problems.append("a note naming a file that is gone answered")
    if answer("path=/elsewhere xt_python=", 0, ["/bin/sh"]):
        problems.append("a note of another PATH answered")
    if answer(here, 0, ["/bin/sh"], ["--test"]):
        problems.append("a note of a plain call answered --test")
    return problems


def selftest(s):
    s.section("a bare machine (the README's commands with only git and make)")
    with open("grader/setup.sh") as f:
        setup_text = f.read()
    work = os.path.abspath(fresh("bare"))
    root = os.path.join(work, "tree")
    throwaway.copy_tree(root, with_build=False)
    log = os.path.join(work, "ran.txt")
    traps = trap_names(setup_text)
    trapped = bare_env(bare_path(os.path.join(work, "bin-traps"), traps, log))
    plain = bare_env(bare_path(os.path.join(work, "bin")), XT_NO_INSTALL="1")
    no_cc = os.path.join(work, "bin-no-compiler")
    bare_path(no_cc)
    for name in ("cc", "gcc", "cpp"):
        if os.path.lexists(os.path.join(no_cc, name)):
            os.remove(os.path.join(no_cc, name))
    no_cc = bare_env(no_cc, XT_NO_INSTALL="1")

    bad = parse_problems(root, trapped, log)
    s.record(f"make reads the Makefile and prints the recipes of {len(ENTRY_POINTS)} entry "
             f"points with only a shell, make, coreutils and cc: none of {len(traps)} "
             "programs setup.sh installs runs", not bad, bad)
    bad = entry_problems(root, plain)
    s.record(f"without them, each of {len(ENTRY_POINTS)} entry points prints setup.sh's one "
             "apt-get command and nothing above it; a plain make names make deps",
             not bad, bad)

    rc, out, err = make(root, ["grade", "LC=1"], no_cc)
    bad = compilerless_problems("make grade LC=1", rc, out + err)
    s.record("with only make and a shell (no compiler), make grade's one apt-get command also "
             f"names {' and '.join(NEEDS_A_COMPILER)}, which only a compiler can look for",
             not bad, bad)
    unnamed = setup_text.replace(OPENBLAS_UNCHECKED, "")
    with open(os.path.join(work, "setup-control.sh"), "w") as f:
        f.write(unnamed)
    res = subprocess.run(["/bin/sh", os.path.join(work, "setup-control.sh")], env=no_cc,
                         capture_output=True, text=True, timeout=60)
    found = compilerless_problems("setup.sh", res.returncode, res.stdout + res.stderr)
    s.record("a setup.sh that skips OpenBLAS without a compiler is reported (negative control)",
             unnamed != setup_text and any("libopenblas-dev" in p for p in found), found)

    # Negative control: the Makefile with an include that Python writes at parse time.
    control = os.path.join(work, "control")
    throwaway.copy_tree(control, with_build=False)
    with open(os.path.join(control, "Makefile"), "a") as f:
        f.write(PARSE_TIME_PYTHON)
    found = parse_problems(control, trapped, log)
    found_entry = entry_problems(control, plain)
    s.record("an include that Python writes while make reads the Makefile is reported, by "
             "the trap and above setup.sh's lines (negative control)",
             any("ran python3" in p for p in found) and
             any("printed, rather than" in p for p in found_entry),
             found[:3] + found_entry[:6])

    modules = []
    py = shutil.which("python3")
    for candidate in ("/usr/bin/python3", py):
        if candidate and os.path.exists(candidate):
            modules = [(candidate, "numpy", "python3-numpy"),
                       (candidate, "pyflakes", "python3-pyflakes")]
            break
    if shutil.which("dpkg") is None:
        s.skip("setup.sh's tools as their packages provide them", "no dpkg here")
    else:
        pairs = setup_pairs(setup_text)
        bad = package_problems(pairs, modules)
        s.record(f"setup.sh looks for each of its {len(pairs)} tools, NumPy and pyflakes as "
                 "the package it installs provides them (dpkg -S)", bool(pairs) and not bad,
                 bad)
        wrong = package_problems([("pyflakes3", "python3-pyflakes"),
                                  ("mpicc", "libopenmpi-dev")], [])
        s.record("a tool looked for under a name its package does not provide (pyflakes3 "
                 "from python3-pyflakes, mpicc from libopenmpi-dev) is reported (negative "
                 "control)", len(wrong) == 2, wrong)

    bad = note_problems(work)
    s.record("setup.sh answers from build/setup.txt while every file it notes is there, for "
             "the same PATH and XT_PYTHON; a noted file gone, another PATH or a note for less "
             "than --test asks means a full check", not bad, bad)

    with open(".ci/run") as f:
        ci_text = f.read()
    with open("README.md") as f:
        readme_text = f.read()
    bad = ci_problems(ci_text, readme_text)
    s.record(".ci/run installs only git and make, runs the README's first command, then "
             "its second; grader/setup.sh's list is the one list of packages", not bad, bad)
    early = ci_text.replace("--no-install-recommends git make",
                            "--no-install-recommends git make python3 python3-numpy")
    found = ci_problems(early, readme_text)
    s.record("a CI script that installs Python before the README's first command is "
             "reported (negative control)",
             early != ci_text and any("python3" in p for p in found), found)
