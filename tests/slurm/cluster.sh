#!/usr/bin/env bash
# A real two-node SLURM cluster on this one machine, for tests that submit sbatch scripts.
#
#   tests/slurm/cluster.sh install   # apt packages (slurmctld slurmd slurm-client munge); needs root
#   tests/slurm/cluster.sh start     # write slurm.conf, start munge + slurmctld + slurmd n1 + slurmd n2
#   tests/slurm/cluster.sh status    # sinfo + squeue
#   tests/slurm/cluster.sh stop      # cancel jobs, stop the daemons (and munged if we started it)
#   tests/slurm/cluster.sh env       # print the export line(s) clients need
#
# Nodes n1 and n2 are two slurmd processes (`slurmd -N`) on 127.0.0.1 with their own ports;
# each has 2 CPUs and one fake GPU (gres gpu:1 backed by a plain file, so CUDA_VISIBLE_DEVICES=0).
# Environment: DISTRECIPE_SLURM_DIR (state directory, default /tmp/distrecipe-slurm),
# DISTRECIPE_SLURM_PORT (slurmctld port, default 17000; the nodes use +1 and +2),
# DISTRECIPE_SLURM_GPUS (fake GPUs per node, default 1; 0 = no GRES configured).
set -euo pipefail

DIR="${DISTRECIPE_SLURM_DIR:-/tmp/distrecipe-slurm}"
PORT="${DISTRECIPE_SLURM_PORT:-17000}"
GPUS="${DISTRECIPE_SLURM_GPUS:-1}"
CONF="$DIR/slurm.conf"
NODES=(n1 n2)
WAIT_S=30

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root"; }

have_binaries() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v sbatch >/dev/null && command -v munged >/dev/null
}

# pid from a pid file if that process is alive, else nothing.
live_pid() {
    local file=$1 pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# SIGTERM the pid in FILE, wait up to 10 s, then SIGKILL; quiet when not running.
stop_pidfile() {
    local file=$1 pid i
    pid=$(live_pid "$file") || { rm -f "$file"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$file"
}

cmd_install() {
    if have_binaries; then
        return 0
    fi
    need_root
    export DEBIAN_FRONTEND=noninteractive
    local out
    out=$(mktemp)
    if ! apt-cache show slurmd >/dev/null 2>&1; then
        apt-get update -qq >"$out" 2>&1 || { cat "$out" >&2; rm -f "$out"; die "apt-get update failed"; }
    fi
    if ! apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >"$out" 2>&1; then
        cat "$out" >&2
        rm -f "$out"
        die "apt-get install failed"
    fi
    rm -f "$out"
    have_binaries || die "install finished but the slurm binaries are missing"
}

write_conf() {
    local host gres_line="" node_gres=""
    host=$(hostname -s)
    mkdir -p "$DIR/run"
    if ((GPUS > 0)); then
        gres_line="GresTypes=gpu"
        node_gres=" Gres=gpu:$GPUS"
        : >"$DIR/gres.conf.tmp"
        local i
        for node in "${NODES[@]}"; do
            for ((i = 0; i < GPUS; i++)); do
                # File= should be a character device (a copy of /dev/null: major 1, minor 3);
                # a plain file also works but slurmd logs an error. The trailing number is
                # the GPU index SLURM puts in CUDA_VISIBLE_DEVICES.
                local dev="$DIR/dev/$node/nvidia$i"
                mkdir -p "$DIR/dev/$node"
                [[ -c $dev ]] || { rm -f "$dev"; mknod "$dev" c 1 3 2>/dev/null || : >"$dev"; }
                echo "NodeName=$node Name=gpu File=$dev" >>"$DIR/gres.conf.tmp"
            done
        done
    fi
    cat >"$CONF.tmp" <<EOF
# Written by tests/slurm/cluster.sh: a two-node cluster on one machine.
ClusterName=distrecipe
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire also delays a requeued job's restart (default 120 s).
AuthInfo=cred_expire=10
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
# Reject impossible requests (e.g. --cpus-per-task=3) at submit instead of pending forever.
EnforcePartLimits=ALL
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
$gres_line
NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=n1 Port=$((PORT + 1)) CPUs=2 RealMemory=4096$node_gres State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=n2 Port=$((PORT + 2)) CPUs=2 RealMemory=4096$node_gres State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

# Install the configuration write_conf staged.
commit_conf() {
    mv "$CONF.tmp" "$CONF"
    if [[ -f $DIR/gres.conf.tmp ]]; then mv "$DIR/gres.conf.tmp" "$DIR/gres.conf"; else rm -f "$DIR/gres.conf"; fi
}

ensure_hosts() {
    local node
    for node in "${NODES[@]}"; do
        if ! grep -Eq "^[[:space:]]*127\.0\.0\.1([[:space:]].*)?[[:space:]]$node([[:space:]]|\$)" /etc/hosts; then
            echo "127.0.0.1 $node" >>/etc/hosts
        fi
    done
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
    munge_ok && return 0
    if [[ ! -s /etc/munge/munge.key ]]; then
        mkdir -p /etc/munge
        if command -v mungekey >/dev/null; then
            mungekey --create --force --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
        chown munge:munge /etc/munge/munge.key 2>/dev/null || true
        chmod 0400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    if id munge >/dev/null 2>&1 && command -v runuser >/dev/null; then
        runuser -u munge -- munged --force
    else
        munged --force
    fi
    touch "$DIR/run/munge-started-by-us"
    local i
    for ((i = 0; i < 50; i++)); do munge_ok && return 0; sleep 0.1; done
    die "munged did not come up"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

all_running() {
    [[ -f $CONF ]] || return 1
    live_pid "$DIR/run/slurmctld.pid" >/dev/null || return 1
    for node in "${NODES[@]}"; do live_pid "$DIR/run/slurmd-$node.pid" >/dev/null || return 1; done
    nodes_idle
}

nodes_idle() {
    local out
    out=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for node in "${NODES[@]}"; do
        grep -Eq "^$node (idle|mix|alloc)$" <<<"$out" || return 1
    done
}

print_env() { echo "export SLURM_CONF=$CONF"; }

cmd_start() {
    need_root
    have_binaries || die "slurm is not installed; run: $0 install"
    mkdir -p "$DIR/run"
    rm -f "$DIR/gres.conf.tmp"
    write_conf
    if all_running && cmp -s "$CONF.tmp" "$CONF"; then
        rm -f "$CONF.tmp" "$DIR/gres.conf.tmp"
        log "already running"
        print_env
        return 0
    fi
    cmd_stop_daemons
    for port in "$PORT" $((PORT + 1)) $((PORT + 2)); do
        port_busy "$port" && die "port $port is in use; set DISTRECIPE_SLURM_PORT"
    done
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/log"
    mkdir -p "$DIR/state" "$DIR/log"
    for node in "${NODES[@]}"; do mkdir -p "$DIR/spool/$node"; done
    commit_conf
    ensure_hosts
    ensure_munge
    export SLURM_CONF=$CONF
    slurmctld -c -f "$CONF"
    for node in "${NODES[@]}"; do slurmd -N "$node" -f "$CONF"; done
    local i
    for ((i = 0; i < WAIT_S * 2; i++)); do
        if nodes_idle; then
            print_env
            return 0
        fi
        sleep 0.5
    done
    log "nodes not idle after ${WAIT_S}s:"
    sinfo -N -l >&2 || true
    tail -n 20 "$DIR"/log/*.log >&2 || true
    exit 1
}

cmd_stop_daemons() {
    local node
    if [[ -f $CONF ]] && live_pid "$DIR/run/slurmctld.pid" >/dev/null; then
        # Cancel leftover jobs so their steps die with the daemons.
        SLURM_CONF=$CONF timeout 10 scancel --quiet --full --partition=debug 2>/dev/null || true
    fi
    # In parallel: each takes 1-2 s to exit on SIGTERM.
    for node in "${NODES[@]}"; do stop_pidfile "$DIR/run/slurmd-$node.pid" & done
    stop_pidfile "$DIR/run/slurmctld.pid" &
    wait
}

cmd_stop() {
    cmd_stop_daemons
    if [[ -f $DIR/run/munge-started-by-us ]]; then
        # Leave munged alone if some other SLURM daemon (another cluster) still needs it.
        if ! pgrep -x slurmd >/dev/null && ! pgrep -x slurmctld >/dev/null; then
            stop_pidfile /run/munge/munged.pid
        fi
        rm -f "$DIR/run/munge-started-by-us"
    fi
}

cmd_status() {
    [[ -f $CONF ]] || die "no cluster config at $CONF; run: $0 start"
    export SLURM_CONF=$CONF
    sinfo -N -l
    squeue
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) print_env ;;
    *) die "usage: $0 install|start|stop|status|env" ;;
esac
