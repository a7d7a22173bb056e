#!/usr/bin/env bash
# A real one-node Slurm on this machine (Debian's slurm-wlm + munge), for tests and for trying
# `executor: slurm` without a cluster. Everything it starts lives under one state folder and is stopped by
# `stop`, by the pids it recorded (never by process name).
#
#   .ci/slurm_localhost.sh install          # apt-get install slurm-wlm munge (root; no-op when present)
#   .ci/slurm_localhost.sh start DIR        # munged + slurmctld + slurmd on 127.0.0.1; waits until the
#                                               # node is idle; prints `export SLURM_CONF=DIR/slurm.conf`
#   .ci/slurm_localhost.sh stop DIR         # cancel DIR's jobs, stop the three daemons it started
#   .ci/slurm_localhost.sh status DIR
#
# Environment: SLURM_PORT (slurmctld; slurmd uses SLURM_PORT+1; default 6817), SLURM_PARTITION (default cpu).
# Exit status of `start`: 0 ready, 3 cannot run here (not root / packages missing: the message says which),
# 1 a daemon failed (its log is printed).
set -euo pipefail

cmd=${1:-}
dir=${2:-}

die() { echo "slurm_localhost: $*" >&2; exit 1; }
cannot() { echo "slurm_localhost: cannot run here: $*" >&2; exit 3; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || cannot "slurm-wlm/munge are not installed and installing them needs root"
    command -v apt-get >/dev/null || cannot "slurm-wlm/munge are not installed and there is no apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

write_config() {
    local host cpus mem port
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
    port=${SLURM_PORT:-6817}
    mkdir -p "$dir"/{state,spool,log,run}
    cat >"$dir/slurm.conf" <<EOF
ClusterName=cotforge-local
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${port}
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${dir}/run/munge.socket
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmdPidFile=${dir}/run/slurmd.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=600
InactiveLimit=0
KillWait=5
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=${SLURM_PARTITION:-cpu} Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF
}

start_daemon() {  # name, pidfile, command...
    local name=$1 pidfile=$2
    shift 2
    "$@" >"$dir/log/$name.out" 2>&1 &
    echo $! >"$pidfile"
}

start() {
    [ -n "$dir" ] || die "usage: $0 start DIR"
    [ "$(id -u)" = 0 ] || cannot "slurmd runs jobs as their user and needs root here"
    command -v slurmctld >/dev/null && command -v munged >/dev/null \
        || cannot "slurm-wlm/munge are not installed (run: $0 install)"
    dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
    if [ -f "$dir/pids/slurmctld" ] && kill -0 "$(cat "$dir/pids/slurmctld")" 2>/dev/null; then
        echo "export SLURM_CONF=$dir/slurm.conf"
        return 0
    fi
    write_config
    mkdir -p "$dir/pids"
    export SLURM_CONF="$dir/slurm.conf"
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$dir/munge.key"
    start_daemon munged "$dir/pids/munged" munged -F --force --key-file="$dir/munge.key" \
        --socket="$dir/run/munge.socket" --pid-file="$dir/run/munged.pid" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/run/munged.seed"
    for _ in $(seq 50); do [ -S "$dir/run/munge.socket" ] && break; sleep 0.1; done
    [ -S "$dir/run/munge.socket" ] || { cat "$dir/log/munged.out" "$dir/log/munged.log" 2>/dev/null; die "munged did not start"; }
    start_daemon slurmctld "$dir/pids/slurmctld" slurmctld -D -i -f "$SLURM_CONF"
    start_daemon slurmd "$dir/pids/slurmd" slurmd -D -f "$SLURM_CONF"
    for _ in $(seq 150); do
        state=$(sinfo -h -N -o "%t" 2>/dev/null | head -1 || true)
        case "$state" in idle*|mix*|alloc*) echo "export SLURM_CONF=$SLURM_CONF"; return 0 ;; esac
        for d in slurmctld slurmd munged; do
            kill -0 "$(cat "$dir/pids/$d")" 2>/dev/null || { tail -n 20 "$dir/log/$d.out" "$dir/log/$d.log" 2>/dev/null; stop; die "$d exited"; }
        done
        sleep 0.2
    done
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" 2>/dev/null
    stop
    die "the node did not become idle within 30 s"
}

stop() {
    [ -n "$dir" ] || die "usage: $0 stop DIR"
    [ -d "$dir/pids" ] || return 0
    export SLURM_CONF="$dir/slurm.conf"
    if [ -f "$dir/pids/slurmctld" ] && kill -0 "$(cat "$dir/pids/slurmctld")" 2>/dev/null; then
        scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    fi
    for d in slurmd slurmctld munged; do
        f="$dir/pids/$d"
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

status() {
    [ -n "$dir" ] || die "usage: $0 status DIR"
    for d in munged slurmctld slurmd; do
        f="$dir/pids/$d"
        if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then echo "$d running (pid $(cat "$f"))"; else echo "$d stopped"; fi
    done
    SLURM_CONF="$dir/slurm.conf" sinfo 2>/dev/null || true
}

case "$cmd" in
    install) install_packages ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 install | start DIR | stop DIR | status DIR" ;;
esac
