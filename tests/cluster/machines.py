"""Several machines on this one, for the cluster tier: hosts as network namespaces joined by a veth
pair, and a SLURM cluster of those hosts (munged, slurmctld and one slurmd per host).

Each host is a network namespace of its own (``ip netns``) with an ``eth0`` at 10.213.0.<1+i>/24 and
an /etc/hosts of its own, as on a stock Debian or Ubuntu machine: the machine's hostname maps to
127.0.0.1 (which is why gloo needs ``GLOO_SOCKET_IFNAME``), and ``node0``, ``node1`` map to the hosts'
addresses. A process runs on a host through ``nsenter --net`` and a private mount namespace in which
that file is bind-mounted over /etc/hosts (``ip netns exec`` would also remount /sys, where slurmd
looks for cgroups). Traffic goes only between the namespaces made here. Everything is undone by
``close()``: every process left in the namespaces is killed by PID, the namespaces are deleted, the
daemons started outside them (munged) are ended by PID.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

SUBNET = "10.213.0"
SLURM_COMMANDS = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue", "scancel", "sinfo")


def missing(slurm: bool = False) -> list:
    """What this machine lacks for the cluster tier (root, ip netns, and for SLURM: slurm-wlm, munge)."""
    lacks = []
    if os.geteuid() != 0:
        lacks.append("root")
    if not (shutil.which("ip") and shutil.which("nsenter") and shutil.which("unshare")):
        lacks.append("ip netns (iproute2, util-linux)")
    if slurm and not all(shutil.which(c) for c in SLURM_COMMANDS):
        lacks.append("slurm-wlm (" + ", ".join(c for c in SLURM_COMMANDS if not shutil.which(c)) + ")")
    if slurm and not (shutil.which("munged") and shutil.which("munge")):
        lacks.append("munge")
    return lacks


def wait_for(condition, timeout: float, what: str, every: float = 0.2):
    """condition()'s first true value within timeout seconds, else AssertionError naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


class Host:
    """One machine: a network namespace with eth0 and its own /etc/hosts."""

    def __init__(self, name: str, netns: str, address: str, hosts_file: str):
        self.name, self.netns, self.address, self.hosts_file = name, netns, address, hosts_file

    def command(self, argv) -> list:
        """argv as run on this host."""
        return [
            "nsenter",
            f"--net=/run/netns/{self.netns}",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"',
            self.hosts_file,
            *argv,
        ]

    def start(self, argv, env, log_path, cwd=None) -> subprocess.Popen:
        """argv started on this host in a session of its own, its output (both streams) into log_path."""
        log = open(log_path, "w")
        try:
            return subprocess.Popen(
                self.command(argv),
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()

    def run(self, argv, env=None, timeout=60, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def pids(self) -> list:
        return [int(p) for p in sh("ip", "netns", "pids", self.netns, check=False).stdout.split()]

    def processes(self) -> dict:
        """{pid: command line} of every process on this host."""
        found = {}
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    found[pid] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                pass
        return found

    def find(self, *words, env=None) -> list:
        """PIDs of the processes on this host whose command line holds every word and, if given, whose
        environment holds every NAME=value of env."""
        found = []
        for pid, cmdline in self.processes().items():
            if not all(w in cmdline for w in words):
                continue
            if env:
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        environ = f.read().split(b"\0")
                except OSError:
                    continue
                if not all(f"{k}={v}".encode() in environ for k, v in env.items()):
                    continue
            found.append(pid)
        return found

    def kill_all(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def free_port_on(host) -> int:
    """A TCP port free on host now."""
    code = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
    return int(host.run([sys.executable, "-c", code]).stdout)


class Network:
    """n hosts, node0 .. node<n-1>, on one veth link (n = 2)."""

    def __init__(self, directory: str, n: int = 2):
        assert n == 2, "one veth pair joins two hosts"
        self.directory = directory
        tag = f"tp{os.getpid() % 100000}"
        self.netns = [f"{tag}n{i}" for i in range(n)]
        self.hosts = []
        names = [f"node{i}" for i in range(n)]
        with open(os.path.join(directory, "hosts"), "w") as f:  # as on stock Debian: the hostname is loopback
            f.write(f"127.0.0.1 localhost\n127.0.0.1 {socket.gethostname()}\n")
            f.writelines(f"{SUBNET}.{i + 1} {name}\n" for i, name in enumerate(names))
        try:
            for ns in self.netns:
                sh("ip", "netns", "add", ns)
            ends = [f"{tag}a", f"{tag}b"]
            sh("ip", "link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
            for i, (ns, end) in enumerate(zip(self.netns, ends)):
                sh("ip", "link", "set", end, "netns", ns)
                sh("ip", "-n", ns, "link", "set", end, "name", "eth0")
                sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{i + 1}/24", "dev", "eth0")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                sh("ip", "-n", ns, "link", "set", "eth0", "up")
                self.hosts.append(Host(names[i], ns, f"{SUBNET}.{i + 1}", os.path.join(directory, "hosts")))
        except Exception:
            self.close()
            raise

    def cut(self, i: int = 1):
        """Cut host i's link (as a pulled cable: its peer keeps the connections, no packet arrives)."""
        sh("ip", "-n", self.netns[i], "link", "set", "eth0", "down")

    def restore(self, i: int = 1):
        sh("ip", "-n", self.netns[i], "link", "set", "eth0", "up")

    def leftovers(self, ignore=()) -> dict:
        """{pid: command line} of the processes on any host but those in ignore (daemons)."""
        return {pid: cmd for host in self.hosts for pid, cmd in host.processes().items() if pid not in ignore}

    def end(self, pids):
        """SIGKILL to each of pids (processes of the hosts)."""
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self):
        for host in self.hosts:
            host.kill_all()
        time.sleep(0.2)
        for ns in self.netns:
            sh("ip", "netns", "del", ns, check=False)  # removes the veth pair too


SLURM_CONF = """\
ClusterName=transformerplugin
SlurmctldHost={controller}({address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.%n.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
{nodes}
PartitionName=cluster Nodes={node_names} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """A SLURM 22.05 cluster on the network's hosts: munged (its own key and socket), slurmctld on
    node0, a slurmd per host. Clients run on node0 with SLURM_CONF pointing at this configuration.
    ``cred_expire=10`` lets a requeued job start again after 11 s instead of SLURM's 121."""

    def __init__(self, network: Network, directory: str, cpus: int = 2):
        self.network, self.d = network, directory
        self.munge_socket = os.path.join(directory, "munge.socket")
        self.conf = os.path.join(directory, "slurm.conf")
        self.daemons = []  # (name, Popen)
        os.makedirs(os.path.join(directory, "state"), exist_ok=True)
        os.makedirs(os.path.join(directory, "spool"), exist_ok=True)
        os.chmod(directory, 0o700)
        key = os.path.join(directory, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        nodes = "\n".join(f"NodeName={h.name} NodeAddr={h.address} CPUs={cpus} State=UNKNOWN" for h in network.hosts)
        with open(self.conf, "w") as f:
            f.write(
                SLURM_CONF.format(
                    controller=socket.gethostname().split(".")[0],
                    address=network.hosts[0].address,
                    munge_socket=self.munge_socket,
                    d=directory,
                    nodes=nodes,
                    node_names=",".join(h.name for h in network.hosts),
                )
            )
        try:
            self._start(
                "munged",
                [
                    "munged",
                    "--force",
                    "--foreground",
                    f"--socket={self.munge_socket}",
                    f"--key-file={key}",
                    f"--log-file={directory}/munged.log",
                    f"--pid-file={directory}/munged.pid",
                    f"--seed-file={directory}/munged.seed",
                ],
            )
            wait_for(lambda: os.path.exists(self.munge_socket), 20, "munged's socket")
            self._start("slurmctld", network.hosts[0].command(["slurmctld", "-D", "-f", self.conf]))
            wait_for(lambda: self.client(["scontrol", "ping"]).stdout.count("UP") > 0, 30, "slurmctld answering")
            for host in network.hosts:
                self._start(f"slurmd {host.name}", host.command(["slurmd", "-D", "-f", self.conf, "-N", host.name]))
            wait_for(lambda: self.idle_nodes() == len(network.hosts), 60, "every slurmd idle (sinfo)")
        except Exception:
            self.close()
            raise

    def _start(self, name, argv):
        log = open(os.path.join(self.d, f"{name.replace(' ', '-')}.out"), "w")
        self.daemons.append(
            (
                name,
                subprocess.Popen(
                    argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                ),
            )
        )
        log.close()

    def env(self, base=None) -> dict:
        env = dict(base if base is not None else os.environ)
        env["SLURM_CONF"] = self.conf
        return env

    def client(self, argv, env=None, cwd=None, timeout=60) -> subprocess.CompletedProcess:
        """A SLURM client command (sbatch, squeue, scontrol, ...) on node0."""
        return self.network.hosts[0].run(argv, env=self.env(env), cwd=cwd, timeout=timeout)

    def idle_nodes(self) -> int:
        out = self.client(["sinfo", "-h", "-N", "-o", "%T"]).stdout.split()
        return sum(state == "idle" for state in out)

    def submit(self, argv, env, cwd) -> int:
        proc = self.client(["sbatch", "--parsable", *argv], env=env, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> dict:
        """scontrol's fields of the job (JobState, ExitCode, Restarts, ...)."""
        out = self.client(["scontrol", "-o", "show", "job", str(job_id)]).stdout
        return dict(field.split("=", 1) for field in out.split() if "=" in field)

    def state(self, job_id: int) -> str:
        return self.job(job_id).get("JobState", "")

    def wait_done(self, job_id: int, timeout: float) -> str:
        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
        return wait_for(
            lambda: self.state(job_id) in ended and self.state(job_id), timeout, f"job {job_id} ended", every=0.5
        )

    def daemon_pids(self) -> set:
        """The daemons this cluster started, and slurmctld's helper daemon (slurmscriptd)."""
        pids = {p.pid for _, p in self.daemons}
        for host in self.network.hosts:
            for pid, cmdline in host.processes().items():
                if "slurmscriptd" in cmdline and parent(pid) in pids:
                    pids.add(pid)
        return pids

    def close(self):
        for _, proc in reversed(self.daemons):  # the slurmds, slurmctld, munged last
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
