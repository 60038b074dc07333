"""Starting MPI programs: the launcher command, its environment, and cleanup.

Every launch runs in a session of its own (setsid). Open MPI gives each rank
a process group of its own but keeps them in mpirun's session, so killing
the session (every process whose session id is mpirun's pid) ends mpirun and
all its ranks. A token in the environment finds any rank that escaped it.
No process of a launch outlives the call that started it.

On a cluster, MPIRUN_ARGS adds launcher arguments (a hostfile, say) and
XT_LAUNCHER replaces the launcher altogether ("srun --mpi=pmix -n {np}").
"""

import functools
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import time
import uuid


@functools.lru_cache(maxsize=None)
def mpi_flavor():
    """('openmpi' | 'mpich' | 'other', version line) of the launcher in use."""
    launcher = shlex.split(os.environ.get("XT_LAUNCHER", "")) or ["mpirun"]
    try:
        out = subprocess.run([launcher[0], "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "missing", ""
    first = out.strip().splitlines()[0] if out.strip() else "mpirun"
    if "Open MPI" in out or "OpenRTE" in out:
        return "openmpi", first.replace("mpirun (Open MPI)", "Open MPI").strip()
    if "HYDRA" in out or "MPICH" in out:
        version = next((line.split(":", 1)[1].strip() for line in out.splitlines()
                        if line.strip().startswith("Version:")), "")
        return "mpich", ("MPICH " + version).strip()
    return "other", first


def library_name(text):
    """'Open MPI 4.1.4' or 'MPICH 4.0.2' from what MPI_Get_library_version says; else its
    first line up to a comma; "" for nothing."""
    m = re.search(r"Open MPI v?(\d[\w.]*)", text)
    if m:
        return f"Open MPI {m.group(1)}"
    m = re.search(r"MPICH Version:\s*(\S+)", text)
    if m:
        return f"MPICH {m.group(1)}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first.split(",")[0].strip()


@functools.lru_cache(maxsize=None)
def library_version(program):
    """The MPI library a built program runs with, as it names itself (libxt's
    --mpi-library: MPI_Get_library_version, before MPI_Init, no launcher); "" if it cannot
    say. The launcher's own version (mpi_flavor) may be another program's: Slurm's srun."""
    try:
        out = subprocess.run([program, "--mpi-library"], capture_output=True, text=True,
                             timeout=30, env=mpi_env())
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return library_name(out.stdout) if out.returncode == 0 else ""


def on_this_machine():
    """Whether every rank runs on this machine: no hostfile or other launcher arguments
    (MPIRUN_ARGS), no other launcher (XT_LAUNCHER)."""
    return not (os.environ.get("MPIRUN_ARGS", "").strip()
                or os.environ.get("XT_LAUNCHER", "").strip())


# Seconds Open MPI waits, once one rank has ended a launch, before it kills the others.
KILL_GRACE = "OMPI_MCA_odls_base_sigkill_timeout"


def mpi_env(extra=None):
    """The environment a launch needs: as root, oversubscribed, quiet."""
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        # More ranks than cores: ranks must yield the core while they wait.
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        # No InfiniBand here; without this, Open MPI warns about every missing device.
        "OMPI_MCA_btl_base_warn_component_unused": "0",
        "PMIX_MCA_gds": "hash",
        # Open MPI 4.1's AVX reduction kernels saturate 8-bit integer sums
        # (200 + 100 gives 255, not 44): use the plain C kernels, which wrap.
        "OMPI_MCA_op": "^avx",
        # Open MPI's MPI-IO (OMPIO) opens every file with its "sm" shared file pointer, a
        # POSIX semaphore named after the file's name alone (/dev/shm/sem.OMPIO_meta.bin):
        # every job that opens a file of that name shares it, and a job killed while it
        # holds it (a refusal's launch ends at once) leaves it locked, so that every later
        # MPI_File_open of that name waits forever. The other components keep nothing
        # between jobs.
        "OMPI_MCA_sharedfp": "^sm",
    })
    # A launch that one rank ends (a refusal's exit, a crash, MPI_Abort) has its other ranks
    # killed by Open MPI after a grace of this many seconds, which ended such a launch up to
    # 1 s late, one time in three (lecture 3's refusals: 0.7 or 1.6 s). libxt's own crash
    # report takes microseconds; AddressSanitizer's takes longer, and keeps the grace
    # (san_env).
    env.setdefault(KILL_GRACE, "0")
    # On one machine Open MPI picks its ob1 point-to-point layer (shared memory) anyway:
    # naming it spares every rank probing the others (cm's libfabric and PSM transports,
    # UCX), a fifth of an 8-rank launch (0.89 -> 0.73 s), and gives every machine the same
    # buffering. A hostfile or another launcher (MPIRUN_ARGS, XT_LAUNCHER) chooses its own.
    if on_this_machine():
        env.setdefault("OMPI_MCA_pml", "ob1")
        # mpirun maps the machine with hwloc, whose I/O discovery reads every PCI device's
        # configuration space: a quarter of an empty 8-rank launch (0.24 -> 0.18 s). Ranks
        # bound to nothing on one machine, talking through shared memory, need no
        # device's place in it.
        env.setdefault("HWLOC_COMPONENTS", "-pci,-linuxio")
    # Ranks share the cores: OpenBLAS need not start a thread per core in each
    # (xt_gemm also runs it single-threaded).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Open MPI will not start, even on one machine, without an ssh or rsh
    # client to launch remote daemons with; a machine without one runs locally.
    if (shutil.which("ssh") is None and shutil.which("rsh") is None
            and "OMPI_MCA_plm_rsh_agent" not in os.environ):
        env["OMPI_MCA_plm_rsh_agent"] = "false"
    if extra:
        env.update(extra)
    return env


# AddressSanitizer's settings for programs built with SAN=1 (ASAN_OPTIONS of one's own come
# after them, and win). Open MPI keeps some memory to the end by design: no leak report. ASan
# exits after its report rather than aborting, so that libxt's SIGABRT handler does not report
# the same error a second time.
SAN_OPTIONS = "detect_leaks=0:abort_on_error=0:halt_on_error=1"


def san_env():
    """ASAN_OPTIONS, and Open MPI's grace before it kills the other ranks back at its 1 s:
    AddressSanitizer's report, symbolized, can take a good part of it, and one rank's
    report cut short by another's end came out as a plain SIGSEGV (1 grade in 30)."""
    mine = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": SAN_OPTIONS + (":" + mine if mine else ""),
            KILL_GRACE: os.environ.get(KILL_GRACE, "1")}


def config_lines(text):
    """(line number, text) of each line of a configuration file that says something (a
    hostfile, slurm.conf, a bench.mk): '#' comments and blank lines left out."""
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            yield n, line


def mpirun_command(np, argv):
    """The command that starts argv on np ranks."""
    launcher = os.environ.get("XT_LAUNCHER", "").strip()
    if launcher:
        return shlex.split(launcher.replace("{np}", str(np))) + list(argv)
    flavor, _ = mpi_flavor()
    if flavor == "openmpi":
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np)]
    else:
        cmd = ["mpirun", "-n", str(np)]
    cmd += shlex.split(os.environ.get("MPIRUN_ARGS", ""))
    return cmd + list(argv)


def shell_line(cmd, env_keys=("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")):
    """The command as a user would type it (with the variables root needs)."""
    prefix = " ".join(f"{k}=1" for k in env_keys) if os.geteuid() == 0 else ""
    line = " ".join(shlex.quote(c) for c in cmd)
    return f"{prefix} {line}".strip()


def _session_of(pid):
    """The session id of a live process (None for zombies: they are already dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        # pid (comm) state ppid pgrp session ...: comm may hold spaces.
        fields = data[data.rindex(")") + 2:].split()
        return None if fields[0] in ("Z", "X") else int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def _has_token(pid, token):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return token.encode() in f.read()
    except OSError:
        return False


def _members(session, token):
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        sid = _session_of(pid)
        if sid is not None and (sid == session or (token and _has_token(pid, token))):
            found.append(pid)
    return found


def kill_launch(session, token):
    """SIGKILL every process of the launch; returns once none is left."""
    deadline = time.monotonic() + 10
    while True:
        pids = _members(session, token)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)


class Result:
    def __init__(self, returncode, seconds, timed_out, output):
        self.returncode = returncode
        self.seconds = seconds
        self.timed_out = timed_out
        self.output = output


_current = []  # launches in progress, killed if the grader itself is interrupted
_stopping = []  # set once the grader is interrupted: no launch starts after that


def _on_signal(signum, frame):
    _stopping.append(signum)
    for session, token in list(_current):
        kill_launch(session, token)
    raise KeyboardInterrupt


def install_signal_handlers():
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def _stream(proc, deadline, on_line):
    """Passes each output line to on_line; False if the deadline passed first."""
    buf = b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if buf:
                on_line(buf.decode(errors="replace"))
            return True
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            on_line(line.decode(errors="replace"))


def wait_exact(proc, timeout):
    """proc.wait(timeout), back the moment proc ends: Popen.wait with a timeout polls, up
    to 50 ms apart, which every grade would wait on after its launch. subprocess's
    TimeoutExpired as wait."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3; or proc already reaped
        return proc.wait(timeout)
    try:
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        if not ready.poll(max(0.0, timeout) * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def run(cmd, timeout, log_path=None, env=None, cwd=None, on_line=None, meanwhile=None):
    """Runs a launch to completion or timeout; kills everything it started.

    With on_line, every line of output goes to on_line as it comes. meanwhile() runs once
    the launch has started, before it is waited for (what the ranks will read, written
    while they start); if it raises, the launch is ended and the error goes on.
    """
    if _stopping:  # interrupted: a thread still grading starts nothing more
        return Result(130, 0.0, False, "the grader was interrupted")
    token = uuid.uuid4().hex
    env = dict(env if env is not None else mpi_env())
    env["XT_LAUNCH_TOKEN"] = token
    out = open(log_path, "wb") if log_path else subprocess.PIPE
    start = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=cwd)
    except OSError as e:
        if log_path:
            out.close()
        return Result(127, 0.0, False, f"cannot start {cmd[0]}: {e}")
    _current.append((proc.pid, token))
    try:
        if meanwhile:
            meanwhile()
        if on_line and not log_path:
            timed_out = not _stream(proc, start + timeout, on_line)
            if timed_out:
                kill_launch(proc.pid, token)
            proc.stdout.close()
            proc.wait()
            stdout = b""
        else:
            try:
                if log_path:
                    wait_exact(proc, timeout)
                    stdout = None
                else:
                    stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_launch(proc.pid, token)
                stdout, _ = proc.communicate()
    finally:
        kill_launch(proc.pid, token)
        _current.remove((proc.pid, token))
        if log_path:
            out.close()
    seconds = time.monotonic() - start
    if log_path:
        with open(log_path, "rb") as f:
            text = f.read().decode(errors="replace")
    else:
        text = (stdout or b"").decode(errors="replace")
    return Result(proc.returncode, seconds, timed_out, text)


def has_gpu():
    """Whether nvidia-smi lists a GPU on this machine."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        return out.returncode == 0 and "GPU" in out.stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
