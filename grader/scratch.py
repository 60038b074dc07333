"""Where a grade's case files live: build/grade, in memory where the ranks run here.

A grade writes thousands of small files (each case's inputs, each rank's outputs), and
the next grade removes them before it writes its own. On a disk that costs more than
the cases: this machine's ext4, mounted with online discard, takes 0.2 s to remove
2,000 small files and then up to ten times as long as on a fresh disk to create the
next 2,000, which is the ranks' time (docs/grader.md, "Where a grade's time goes"). In
a tmpfs (/dev/shm) both take milliseconds. So where every rank runs on this machine
(neither MPIRUN_ARGS nor XT_LAUNCHER: another node would not see this machine's
memory), build/grade is a link to

    /dev/shm/xtrain-<uid>/<digest of the tree's path>/grade

while the tmpfs has room (MIN_FREE to begin, KEEP_FREE to go on); the paths a report
names stay build/grade/... . XT_SCRATCH=disk keeps the files in build/grade itself;
XT_SCRATCH=DIR puts them in DIR/<digest>/grade. `make clean` removes them with the link;
a tree removed without it leaves its files to the next grade of any tree, which
removes every digest whose tree is gone.
"""

import hashlib
import os
import shutil
import time

import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = os.path.join("build", "grade")
MIN_FREE = 4 << 30   # bytes free on the tmpfs for a grade to begin using it
KEEP_FREE = 1 << 30  # and for one to go on using it
OWNER = "tree"       # in each digest's directory: the path of the tree it belongs to

_done = []


def _tmpfs(path):
    """Whether path is a mount point of a tmpfs (/proc/mounts)."""
    try:
        with open("/proc/mounts") as f:
            return any(len(p) > 2 and p[1] == path and p[2] == "tmpfs"
                       for p in (line.split() for line in f))
    except OSError:
        return False


def _free(path):
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def base():
    """The directory the digests go in, and the least room it must have free (0: no
    matter), or (None, 0) for build/grade on disk."""
    choice = os.environ.get("XT_SCRATCH", "").strip()
    if choice == "disk" or not launch.on_this_machine():
        return None, 0
    if choice:
        return os.path.abspath(choice), 0
    if (os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK)
            and _tmpfs("/dev/shm")):
        return os.path.join("/dev/shm", f"xtrain-{os.getuid()}"), KEEP_FREE
    return None, 0


def target_of(root, where):
    digest = hashlib.sha1(os.path.realpath(root).encode()).hexdigest()[:16]
    return os.path.join(where, digest, "grade")


def _sweep(where):
    """Removes the digests under where whose tree is gone, or no longer links to them."""
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        d = os.path.join(where, name)
        try:
            if time.time() - os.stat(d).st_mtime < 60:
                continue  # being made by another grade, which links it next
            with open(os.path.join(d, OWNER)) as f:
                tree = f.read().strip()
        except OSError:
            tree = ""
        link = os.path.join(tree, LINK) if tree else ""
        try:
            mine = bool(tree) and os.readlink(link) == os.path.join(d, "grade")
        except OSError:
            mine = False
        if not mine:
            shutil.rmtree(d, ignore_errors=True)


def _make_link(target, root):
    """build/grade -> target; what build/grade held before is removed."""
    link = os.path.join(root, LINK)
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(os.path.dirname(target), OWNER), "w") as f:
        f.write(os.path.realpath(root) + "\n")
    if os.path.islink(link):
        os.unlink(link)
    elif os.path.isdir(link):
        shutil.rmtree(link, ignore_errors=True)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    try:
        os.symlink(target, link)
    except FileExistsError:  # another grade of this tree made it meanwhile
        pass


def _unlink(root):
    """build/grade back on disk; the files it linked to removed."""
    link = os.path.join(root, LINK)
    if os.path.islink(link):
        try:
            old = os.readlink(link)
            os.unlink(link)
            shutil.rmtree(os.path.dirname(old), ignore_errors=True)
        except OSError:
            pass


def prepare(root=ROOT):
    """Makes build/grade what this process's grades should use (once a process)."""
    if not _done:
        _done.append(True)
        arrange(root)


def arrange(root):
    """build/grade of the tree at root: a link into the tmpfs, or a directory on disk."""
    where, keep = base()
    if where is None:
        _unlink(root)
        return
    target = target_of(root, where)
    link = os.path.join(root, LINK)
    try:
        _sweep(where)  # the files of trees that are gone
        current = os.readlink(link) if os.path.islink(link) else None
        if current == target and os.path.isdir(target):
            if keep and _free(where) < keep:
                _unlink(root)  # the memory is running out: on disk from now on
            return
        if keep and _free(os.path.dirname(where)) < MIN_FREE:
            _unlink(root)
            return
        os.makedirs(where, mode=0o700, exist_ok=True)
        _make_link(target, root)
    except OSError:
        _unlink(root)  # anything odd: the disk, as before
