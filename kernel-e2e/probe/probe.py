"""Precise attempts for the kernel-e2e suite, run inside (and outside) the sandbox.

Usage: probe.py OP[#LABEL] ARG... [+ OP[#LABEL] ARG...]...

Each step makes one attempt and reports what the kernel answered, one line on stdout:
    step OP[#LABEL] ok [DETAIL]
    step OP[#LABEL] err ERRNO_NAME message
A failed step is also reported on stderr in the usual strerror form ("Read-only file system",
"Permission denied", "Operation not permitted", ...), because that is the text agentd classifies
denials by. Some steps print `data KEY VALUE` lines with what they observed. Every step runs even
after a failure; the exit status is 0 when every step succeeded, 1 otherwise, 3 on a usage error.

Arguments have $VARS expanded from the environment, and `@agentd`, `@helper` replaced by the pids
read by the `wait-pids` step. Syscalls without a Python wrapper go through ctypes with the
numbers of the running architecture, so a step fails with "unsupported" rather than calling the
wrong syscall on an architecture this file does not know.
"""

import ctypes
import errno
import fcntl
import mmap
import os
import platform
import resource
import signal
import socket
import struct
import sys
import time

SYSCALLS = {
    "x86_64": {
        "ptrace": 101,
        "process_vm_readv": 310,
        "unshare": 272,
        "clone": 56,
        "clone3": 435,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "memfd_create": 319,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "getpid": 39,
        "landlock_create_ruleset": 444,
        "ioprio_set": 251,
        "ioprio_get": 252,
        "pidfd_open": 434,
        "pidfd_getfd": 438,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "userfaultfd": 323,
        "memfd_secret": 447,
    },
    "aarch64": {
        "ptrace": 117,
        "process_vm_readv": 270,
        "unshare": 97,
        "clone": 220,
        "clone3": 435,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "memfd_create": 279,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "getpid": 172,
        "landlock_create_ruleset": 444,
        "ioprio_set": 30,
        "ioprio_get": 31,
        "pidfd_open": 434,
        "pidfd_getfd": 438,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "userfaultfd": 282,
        "memfd_secret": 447,
    },
}

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
PTRACE_SEIZE = 0x4206
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
TIOCSCTTY = 0x540E
O_CLOEXEC = 0o2000000
UFFD_USER_MODE_ONLY = 1
USERFAULTFD_IOC_NEW = 0xAA00
MAX_HANDLE_SZ = 128
AF_VSOCK = 40
AF_BLUETOOTH = 31
ETH_P_ALL = 0x0003

PAYLOAD = b"written by the kernel-e2e probe\n"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ioctl.restype = ctypes.c_int
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]

pids = {}
# Descriptors a step keeps open (and locked) for the rest of the run.
held = []
failures = 0
# The label of the step being run, for the `data` lines it prints.
current = ""


class Unsupported(Exception):
    """The step cannot be attempted here (unknown architecture, missing facility)."""


class Killed(Exception):
    """The child making the attempt was killed by a signal (a filter's SIGSYS, say)."""

    def __init__(self, signal_number):
        super().__init__(f"killed by signal {signal_number}")
        self.signal_number = signal_number


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def ok(op, detail=""):
    out(f"step {op} ok {detail}".rstrip())


def err(op, what, e):
    global failures
    failures += 1
    name = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "EUNKNOWN"
    message = os.strerror(e.errno) if e.errno else str(e)
    out(f"step {op} err {name} {message}")
    sys.stderr.write(f"probe: {op} {what}: {message}\n")
    sys.stderr.flush()


def syscall(name, *args):
    table = SYSCALLS.get(platform.machine())
    if table is None:
        raise Unsupported(f"no syscall table for {platform.machine()}")
    converted = []
    for a in args:
        if isinstance(a, int):
            converted.append(ctypes.c_long(a))
        elif isinstance(a, bytes):
            converted.append(ctypes.c_char_p(a))
        else:
            converted.append(a)
    ret = libc.syscall(ctypes.c_long(table[name]), *converted)
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def in_child(body):
    """Runs body() in a forked child, so namespace or tracing changes never touch this process.

    body returns nothing on success or raises OSError; the child's exit status carries the errno.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except OSError as e:
            code = e.errno or 255
        except BaseException:
            code = 255
        sys.stdout.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        raise Killed(-code)
    if code != 0:
        raise OSError(code, os.strerror(code))


def run_reporting_child(body):
    """Runs body() in a forked child that prints its own step lines; counts its failures here."""
    global failures
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(min(failures, 100))
    _, status = os.waitpid(pid, 0)
    failures += max(os.waitstatus_to_exitcode(status), 0)


def write_existing(path):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, PAYLOAD)
    finally:
        os.close(fd)


def create_new(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, PAYLOAD)
    finally:
        os.close(fd)


def create_with_parents(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    create_new(path)


def lock(path):
    """Takes an exclusive flock and a POSIX read lock on `path` and holds both until the end.

    Read locks, because a read-only file can only be opened for reading; any lock is enough to
    stall a helper that would wait for one.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    held.append(fd)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


def fifo_hold(path):
    """Makes a FIFO at `path` and holds it open (read-write, so opening it does not block)."""
    os.mkfifo(path, 0o600)
    held.append(os.open(path, os.O_RDWR | os.O_NONBLOCK))


def fifo_write(path):
    """Writes PAYLOAD into an existing FIFO without blocking (a reader must hold it open)."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, PAYLOAD)
    finally:
        os.close(fd)


# System V IPC through libc: the objects are found by key, as an attacker would find another
# process's (the keys are listed in /proc/sysvipc).
IPC_CREAT, IPC_EXCL, IPC_RMID, IPC_STAT = 0o1000, 0o2000, 0, 2
SETVAL, GETVAL = 16, 12
for _name in ("shmget", "msgget", "semget", "shmdt", "msgctl", "semctl", "shmctl"):
    getattr(libc, _name).restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.msgsnd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
SHM_SIZE = 4096
MSG_TEXT = 64


def checked(ret):
    if ret == -1 or ret is None or ret == ctypes.c_void_p(-1).value:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def ipc_get(kind, key, create=False):
    flags = (IPC_CREAT | IPC_EXCL | 0o600) if create else 0
    key = int(key, 0)
    if kind == "shm":
        return checked(libc.shmget(key, SHM_SIZE if create else 0, flags))
    if kind == "msg":
        return checked(libc.msgget(key, flags))
    return checked(libc.semget(key, 1 if create else 0, flags))


def shm_write(key, text):
    """Attaches the segment with key `key` read-write and writes `text` at its start."""
    address = checked(libc.shmat(ipc_get("shm", key), None, 0))
    data = text.encode() + b"\0"
    ctypes.memmove(address, data, len(data))
    libc.shmdt(ctypes.c_void_p(address))


def shm_read(key):
    address = checked(libc.shmat(ipc_get("shm", key), None, 0o10000))  # SHM_RDONLY
    data = ctypes.string_at(address)
    libc.shmdt(ctypes.c_void_p(address))
    out(f"data {current} {data.decode(errors='replace') or '(empty)'}")


class MsgBuf(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * MSG_TEXT)]


def msg_send(key):
    message = MsgBuf(1, PAYLOAD[:MSG_TEXT])
    checked(libc.msgsnd(ipc_get("msg", key), ctypes.byref(message), MSG_TEXT, 0o4000))  # IPC_NOWAIT


class MsqidDs(ctypes.Structure):
    # struct msqid_ds on 64-bit Linux: ipc_perm (48 bytes), times, counters.
    _fields_ = [("perm", ctypes.c_byte * 48), ("stime", ctypes.c_long), ("rtime", ctypes.c_long),
                ("ctime", ctypes.c_long), ("cbytes", ctypes.c_ulong), ("qnum", ctypes.c_ulong),
                ("qbytes", ctypes.c_ulong), ("lspid", ctypes.c_int), ("lrpid", ctypes.c_int),
                ("unused", ctypes.c_ulong * 2)]


def msg_count(key):
    stat = MsqidDs()
    checked(libc.msgctl(ipc_get("msg", key), IPC_STAT, ctypes.byref(stat)))
    out(f"data {current} {stat.qnum}")


def sem_set(key, value):
    checked(libc.semctl(ipc_get("sem", key), 0, SETVAL, ctypes.c_int(int(value))))


def sem_get(key):
    out(f"data {current} {checked(libc.semctl(ipc_get('sem', key), 0, GETVAL))}")


def ipc_remove(kind, key):
    ident = ipc_get(kind, key)
    if kind == "shm":
        checked(libc.shmctl(ident, IPC_RMID, None))
    elif kind == "msg":
        checked(libc.msgctl(ident, IPC_RMID, None))
    else:
        checked(libc.semctl(ident, 0, IPC_RMID))


def sched_idle(pid):
    os.sched_setscheduler(int(pid), os.SCHED_IDLE, os.sched_param(0))


IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3


def ioprio_idle(pid):
    syscall("ioprio_set", IOPRIO_WHO_PROCESS, int(pid), IOPRIO_CLASS_IDLE << 13)


def sched_state(pid):
    """Prints what the scheduling calls change: nice, policy, CPUs allowed, I/O class."""
    pid = int(pid)
    ioprio = syscall("ioprio_get", IOPRIO_WHO_PROCESS, pid)
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(pid)))
    out(f"data {current} nice={os.getpriority(os.PRIO_PROCESS, pid)} "
        f"policy={os.sched_getscheduler(pid)} cpus={cpus} ioclass={ioprio >> 13}")


def toctou_open(path, outside, tries):
    """Check-then-use by path, as a sandbox that checks a name and later uses it would: resolve
    `path`, go on only if it is itself a real directory, then create a file in it by name.
    Reports the try on which the file landed in `outside` (while `path` was being swapped with
    a symlink to it); fails if it never did within `tries`."""
    for attempt in range(1, int(tries) + 1):
        try:
            # realpath reads a link that may be a directory again by then (EINVAL).
            if os.path.realpath(path) != path:
                continue
        except OSError:
            continue
        name = f"f-{attempt}"
        try:
            fd = os.open(os.path.join(path, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            continue
        os.close(fd)
        if os.path.exists(os.path.join(outside, name)):
            out(f"data {current} {attempt}")
            return
    raise OSError(errno.EAGAIN, f"the swap was never caught in {tries} tries")


def open_trunc(path):
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))


def reopen_rw(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        rw = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        try:
            os.write(rw, PAYLOAD)
        finally:
            os.close(rw)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        data = f.read(65536)
    out(f"data {current} " + data.replace(b"\0", b" ").decode("utf-8", "replace").replace("\n", " "))


def listdir(path):
    out(f"data {current} " + " ".join(sorted(os.listdir(path))))


def family(name):
    names = {
        "inet": socket.AF_INET,
        "inet6": socket.AF_INET6,
        "unix": socket.AF_UNIX,
        "packet": socket.AF_PACKET,
        "netlink": socket.AF_NETLINK,
        "vsock": AF_VSOCK,
        "bluetooth": AF_BLUETOOTH,
    }
    return names[name] if name in names else int(name)


def socktype(name):
    names = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "raw": socket.SOCK_RAW}
    return names[name] if name in names else int(name)


def open_socket(fam, typ, proto):
    s = socket.socket(family(fam), socktype(typ), int(proto, 0))
    s.close()


def tcp_connect(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect((host, int(port)))


def udp_send(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(PAYLOAD, (host, int(port)))


def unix_connect(address):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(address)


def unix_sendto(address):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(PAYLOAD, address)


def pair_sendto(address):
    # A datagram pair takes a destination on every send, so it could reach named sockets
    # without socket() or connect().
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.sendto(PAYLOAD, address)


def socketpair():
    a, b = socket.socketpair()
    a.sendall(b"x")
    got = b.recv(1)
    a.close()
    b.close()
    if got != b"x":
        raise OSError(errno.EIO, "socketpair did not carry data")


def io_uring_setup():
    params = ctypes.create_string_buffer(120)
    fd = syscall("io_uring_setup", 1, params)
    os.close(fd)


def io_uring_call(name):
    # With a descriptor that is not a ring, the kernel itself answers EBADF; a filter answers
    # before the kernel looks at the arguments.
    if name == "io_uring_enter":
        syscall(name, -1, 0, 0, 0, 0, 0)
    else:
        syscall(name, -1, 0, 0, 0)


def send_signal(sig, pid):
    number = int(sig) if sig.isdigit() else getattr(signal, "SIG" + sig.upper().removeprefix("SIG"))
    os.kill(int(pid), number)


def ptrace_seize(pid):
    # PTRACE_SEIZE makes the same permission checks as PTRACE_ATTACH without stopping the target,
    # so a sandbox that wrongly allows it does not freeze agentd or the helper mid-run. The
    # tracer's exit detaches.
    syscall("ptrace", PTRACE_SEIZE, int(pid), 0, 0)


def vm_read(pid, address):
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buf = ctypes.create_string_buffer(16)
    local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 16)
    remote = IoVec(int(address, 0), 16)
    syscall("process_vm_readv", int(pid), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)


def keyctl_session():
    # KEYCTL_GET_KEYRING_ID of KEY_SPEC_SESSION_KEYRING, creating it if needed.
    syscall("keyctl", 0, -3, 1)


def add_key():
    # A key in the process keyring, which ends with this process.
    syscall("add_key", b"user", b"agentd-e2e", b"x", 1, -2)


def request_key():
    syscall("request_key", b"user", b"agentd-e2e-absent", 0, -2)


def x32_getpid():
    """getpid through the x32 ABI (syscall number with bit 30 set), in a child in case a filter
    kills the caller. ENOSYS: the kernel has no x32 support."""
    if platform.machine() != "x86_64":
        raise Unsupported("x32 exists only on x86_64")
    in_child(x32_call)


def x32_call():
    ret = libc.syscall(ctypes.c_long(0x40000000 | 39))
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def unshare_user():
    in_child(lambda: syscall("unshare", CLONE_NEWUSER))


def clone_newuser():
    def body():
        pid = syscall("clone", CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    in_child(body)


def clone3():
    # Invalid arguments: the kernel answers EINVAL, a filter answers ENOSYS without looking.
    syscall("clone3", 0, 0)


MISSING = b"/agentd-e2e-nonexistent"


def mount_api():
    """Each mount-API syscall, with arguments the kernel itself rejects harmlessly.

    Run in a child that first tries a private mount namespace (and, when not root, a user
    namespace), so that outside any sandbox the calls reach the kernel's own argument checks
    and nothing changes on the host. Inside the sandbox the filter answers first.
    """
    calls = [
        ("mount", lambda: syscall("mount", b"none", MISSING, b"tmpfs", 0, 0)),
        ("umount2", lambda: syscall("umount2", MISSING, 0)),
        ("open_tree", lambda: syscall("open_tree", -100, MISSING, 0)),
        ("move_mount", lambda: syscall("move_mount", -100, MISSING, -100, MISSING + b"2", 0)),
        ("fsopen", lambda: syscall("fsopen", b"agentd-e2e-nofs", 0)),
        ("fsconfig", lambda: syscall("fsconfig", -1, 0, b"ro", 0, 0)),
        ("fsmount", lambda: syscall("fsmount", -1, 0, 0)),
        ("fspick", lambda: syscall("fspick", -100, MISSING, 0)),
        ("mount_setattr", lambda: syscall("mount_setattr", -100, MISSING, 0, 0, 0)),
        ("pivot_root", lambda: syscall("pivot_root", MISSING, MISSING)),
    ]

    def body():
        flags = CLONE_NEWNS if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNS
        try:
            syscall("unshare", flags)
            ok("private-mount-namespace")
        except OSError as e:
            err("private-mount-namespace", "", e)
        for name, call in calls:
            try:
                call()
                ok(name)
            except OSError as e:
                err(name, MISSING.decode(), e)

    run_reporting_child(body)


def tiocsti():
    """TIOCSTI on a controlling pty of our own, plainly and with high bits set in the command.

    The kernel only looks at the low 32 bits of the command, so a filter comparing all 64 bits
    would let the second form through (CVE-2019-10063). TIOCLINUX is not meaningful on a pty;
    outside a sandbox the kernel answers with its own error, inside the filter answers first.
    """
    names = ["tiocsti", "tiocsti-high-bits", "tioclinux"]
    try:
        master, slave_fd = os.openpty()
    except OSError as e:
        # No terminal to inject into at all: each attempt fails the same way, on the device
        # openpty opens.
        for name in names:
            err(name, "/dev/ptmx", e)
        return
    slave_name = os.ttyname(slave_fd)
    os.close(slave_fd)

    def body():
        os.setsid()
        fd = os.open(slave_name, os.O_RDWR)
        libc.ioctl(fd, TIOCSCTTY, None)
        ch = ctypes.c_char(b"x")
        for name, cmd in zip(names, [TIOCSTI, TIOCSTI | (1 << 32), TIOCLINUX]):
            if libc.ioctl(fd, cmd, ctypes.byref(ch)) == 0:
                ok(name)
            else:
                e = ctypes.get_errno()
                err(name, slave_name, OSError(e, os.strerror(e)))

    run_reporting_child(body)
    os.close(master)


def pidfd_getfd():
    """Takes this process's own stdin through a pidfd of itself, which the kernel allows."""
    pidfd = syscall("pidfd_open", os.getpid(), 0)
    try:
        os.close(syscall("pidfd_getfd", pidfd, 0, 0))
    finally:
        os.close(pidfd)


def file_handle_buffer():
    """A `struct file_handle` with room for the largest handle."""
    handle = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
    struct.pack_into("I", handle, 0, MAX_HANDLE_SZ)
    return handle


def name_to_handle():
    # The kernel answers with the handle, or EOPNOTSUPP on a file system without them.
    mount_id = ctypes.c_int()
    syscall("name_to_handle_at", -100, b".", file_handle_buffer(), ctypes.byref(mount_id), 0)


def open_by_handle():
    # A mount descriptor that is not one: the kernel answers EBADF, a filter answers first.
    # (Kernels before 6.9 check CAP_DAC_READ_SEARCH first: EPERM for everyone but root.)
    syscall("open_by_handle_at", -1, file_handle_buffer(), os.O_RDONLY)


def userfaultfd():
    # User-mode faults only: what the kernel grants everyone (5.11 and later).
    os.close(syscall("userfaultfd", O_CLOEXEC | UFFD_USER_MODE_ONLY))


def userfaultfd_device():
    """A userfaultfd by ioctl on /dev/userfaultfd, which only root may open."""
    fd = os.open("/dev/userfaultfd", os.O_RDONLY | os.O_CLOEXEC)
    try:
        ret = libc.ioctl(fd, USERFAULTFD_IOC_NEW, ctypes.c_void_p(O_CLOEXEC))
        if ret < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        os.close(ret)
    finally:
        os.close(fd)


def memfd_secret():
    # ENOSYS from a kernel without secret memory (secretmem off); a filter answers EPERM.
    os.close(syscall("memfd_secret", O_CLOEXEC))


def memfd_exec(script):
    """Copies /bin/sh into an anonymous memory file and executes it from there."""
    fd = syscall("memfd_create", b"agentd-e2e-payload", 0)
    with open("/bin/sh", "rb") as f:
        os.write(fd, f.read())
    ok("memfd-exec")
    sys.stderr.flush()
    os.execve(fd, ["sh", "-c", script], dict(os.environ))


def status():
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("NoNewPrivs", "Seccomp", "CapEff", "CapPrm", "CapBnd", "CapAmb"):
                out(f"data {key} {value.strip()}")
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    out(f"data RLIMIT_CORE {soft} {hard}")


def fds():
    open_fds = []
    for fd in range(1024):
        try:
            os.fstat(fd)
            open_fds.append(str(fd))
        except OSError:
            pass
    out("data fds " + " ".join(open_fds))


def env():
    for key, value in sorted(os.environ.items()):
        out(f"data env {key}={value}")


def fork_count(limit, tag):
    """Forks up to `limit` children that wait on a pipe; reports how many it got.

    Bounded on purpose: a sandbox whose process limit does not work must not take the machine
    down with it. The children leave as soon as the pipe closes, so the tree ends with us.
    """
    del tag  # only here so the processes can be found by their command line
    read_end, write_end = os.pipe()
    children = []
    failure = None
    for _ in range(int(limit)):
        try:
            pid = os.fork()
        except OSError as e:
            failure = e
            break
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)
            os._exit(0)
        children.append(pid)
    os.close(write_end)
    for pid in children:
        os.waitpid(pid, 0)
    out(f"data forked {len(children)}")
    if failure is not None:
        raise failure


def sleep_tree(tag):
    """A process and a session-leading grandchild that both sleep until killed."""
    del tag
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            signal.pause()
        os._exit(0)
    os.waitpid(pid, 0)
    out("ready")
    signal.pause()


def daemon_touch(path):
    """Leaves behind a detached session that touches `path` in a loop, then returns.

    The daemon reports on a pipe once it has detached, so this step returns only when the
    survivor really exists.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, b"x")
            os.close(write_end)
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            while True:
                try:
                    with open(path, "a"):
                        pass
                except OSError:
                    pass
                time.sleep(0.2)
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    if os.read(read_end, 1) != b"x":
        raise OSError(errno.ECHILD, "the daemon did not start")


def write_bytes(path, count):
    remaining = int(count)
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        while remaining > 0:
            remaining -= f.write(chunk[: min(remaining, len(chunk))])


def map_bytes(count):
    m = mmap.mmap(-1, int(count), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.close()


def crash():
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)


def landlock_abi():
    # LANDLOCK_CREATE_RULESET_VERSION: the ABI version, or an error when Landlock is off.
    out(f"data landlock-abi {syscall('landlock_create_ruleset', 0, 0, 1)}")


def wait_pids():
    """Says `ready` and reads `agentd=PID helper=PID` from stdin, for later `@name` arguments."""
    out("ready")
    line = sys.stdin.readline()
    for word in line.split():
        name, _, value = word.partition("=")
        pids[name] = value
    if "agentd" not in pids:
        raise OSError(errno.EPROTO, f"no pids on stdin: {line!r}")


OPS = {
    "write": (write_existing, 1),
    "create": (create_new, 1),
    "create-path": (create_with_parents, 1),
    "lock": (lock, 1),
    "fifo-hold": (fifo_hold, 1),
    "toctou-open": (toctou_open, 3),
    "fifo-write": (fifo_write, 1),
    "shm-create": (lambda key: ipc_get("shm", key, create=True), 1),
    "msg-create": (lambda key: ipc_get("msg", key, create=True), 1),
    "sem-create": (lambda key: ipc_get("sem", key, create=True), 1),
    "shm-write": (shm_write, 2),
    "shm-read": (shm_read, 1),
    "msg-send": (msg_send, 1),
    "msg-count": (msg_count, 1),
    "sem-set": (sem_set, 2),
    "sem-get": (sem_get, 1),
    "ipc-remove": (ipc_remove, 2),
    "set-priority": (lambda pid: os.setpriority(os.PRIO_PROCESS, int(pid), 19), 1),
    "set-affinity": (lambda pid: os.sched_setaffinity(int(pid), {0}), 1),
    "sched-idle": (sched_idle, 1),
    "ioprio-idle": (ioprio_idle, 1),
    "sched-state": (sched_state, 1),
    "mkdir": (os.mkdir, 1),
    "makedirs": (lambda p: os.makedirs(p, exist_ok=True), 1),
    "rmdir": (os.rmdir, 1),
    "unlink": (os.unlink, 1),
    "rename": (os.rename, 2),
    "symlink": (os.symlink, 2),
    "link": (os.link, 2),
    "mkfifo": (os.mkfifo, 1),
    "mknod-char": (lambda p, ma, mi: os.mknod(p, 0o600 | 0o020000, os.makedev(int(ma), int(mi))), 3),
    "truncate": (lambda p: os.truncate(p, 0), 1),
    "open-trunc": (open_trunc, 1),
    "reopen-rw": (reopen_rw, 1),
    "read": (read_file, 1),
    "listdir": (listdir, 1),
    "readlink": (lambda p: out(f"data {current} {os.readlink(p)}"), 1),
    "socket": (open_socket, 3),
    "tcp-connect": (tcp_connect, 2),
    "udp-send": (udp_send, 2),
    "unix-connect": (unix_connect, 1),
    "unix-sendto": (unix_sendto, 1),
    "abstract-connect": (lambda name: unix_connect("\0" + name), 1),
    "abstract-sendto": (lambda name: unix_sendto("\0" + name), 1),
    "abstract-pair-sendto": (lambda name: pair_sendto("\0" + name), 1),
    "socketpair": (socketpair, 0),
    "pair-sendto": (pair_sendto, 1),
    "io-uring-setup": (io_uring_setup, 0),
    "io-uring-enter": (lambda: io_uring_call("io_uring_enter"), 0),
    "io-uring-register": (lambda: io_uring_call("io_uring_register"), 0),
    "kill": (send_signal, 2),
    "ptrace-seize": (ptrace_seize, 1),
    "vm-read": (vm_read, 2),
    "keyctl-session": (keyctl_session, 0),
    "add-key": (add_key, 0),
    "request-key": (request_key, 0),
    "unshare-user": (unshare_user, 0),
    "clone-newuser": (clone_newuser, 0),
    "clone3": (clone3, 0),
    "x32-getpid": (x32_getpid, 0),
    "mount-api": (mount_api, 0),
    "tiocsti": (tiocsti, 0),
    "memfd-exec": (memfd_exec, 1),
    "pidfd-getfd": (pidfd_getfd, 0),
    "name-to-handle": (name_to_handle, 0),
    "open-by-handle": (open_by_handle, 0),
    "userfaultfd": (userfaultfd, 0),
    "userfaultfd-device": (userfaultfd_device, 0),
    "memfd-secret": (memfd_secret, 0),
    "status": (status, 0),
    "fds": (fds, 0),
    "env": (env, 0),
    "fork-count": (fork_count, 2),
    "sleep-tree": (sleep_tree, 1),
    "daemon-touch": (daemon_touch, 1),
    "write-bytes": (write_bytes, 2),
    "map-bytes": (map_bytes, 1),
    "crash": (crash, 0),
    "wait-pids": (wait_pids, 0),
    "landlock-abi": (landlock_abi, 0),
}

# Steps that report their own `step` lines (several per call).
SELF_REPORTING = {"mount-api", "tiocsti", "memfd-exec"}


def expand(arg):
    for name, pid in pids.items():
        arg = arg.replace("@" + name, pid)
    return os.path.expandvars(arg)


def main(argv):
    global current, failures
    steps, current = [], []
    for arg in argv:
        if arg == "+":
            steps.append(current)
            current = []
        else:
            current.append(arg)
    steps.append(current)
    for step in steps:
        op = step[0].partition("#")[0] if step else ""
        if op not in OPS or len(step) - 1 != OPS[op][1]:
            sys.stderr.write(f"probe: bad step {step!r}\n")
            return 3
    for name, *raw in steps:
        op, _, label = name.partition("#")
        current = label or op
        args = [expand(a) for a in raw]
        func = OPS[op][0]
        try:
            func(*args)
            if op not in SELF_REPORTING:
                ok(name)
        except OSError as e:
            err(name, " ".join(args), e)
        except Killed as k:
            failures += 1
            out(f"step {name} err SIG{k.signal_number} {k}")
            sys.stderr.write(f"probe: {name}: {k}\n")
        except Unsupported as e:
            out(f"step {name} unsupported {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
