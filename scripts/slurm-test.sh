#!/usr/bin/env bash
# Slurm integration test for `harness sweep submit --slurm`.
#
# Starts a throwaway single-node Slurm on this machine (its own munged, slurmctld and slurmd; all
# configuration, state and logs in a temporary directory; ports chosen free), submits a tiny 2-run
# sweep on the fixture corpus as a job array, sends one task the time-limit warning (USR1) mid-run
# so it checkpoints, requeues itself and resumes, waits for both tasks (bounded), checks with
# `harness sweep status` that both runs are done in their HDF5 files, and stops the daemons.
#
#   scripts/slurm-test.sh [path/to/harness]     (default: build/harness)
#
# Exit 0 passed, 1 failed, 77 skipped ("SKIPPED: <reason>": Slurm cannot run here — no binaries,
# not root, or a daemon would not start). A skip is never reported as a pass.
set -uo pipefail

export PATH="$PATH:/usr/sbin:/sbin"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HARNESS=${1:-$REPO/build/harness}
FIXTURE=$REPO/tests/data/sotu
TIMEOUT_S=${SLURM_TEST_TIMEOUT:-100}   # for the jobs, after the daemons are up

skip() { echo "SKIPPED: $*"; exit 77; }
[ -x "$HARNESS" ] || { echo "FAILED: no harness binary at $HARNESS"; exit 1; }
HARNESS=$(readlink -f "$HARNESS")
[ -d "$FIXTURE" ] || { echo "FAILED: fixture corpus $FIXTURE missing"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root: slurmd runs as root to start jobs (SlurmUser=root)"

need=(munged slurmctld slurmd sbatch squeue scontrol sinfo scancel)
missing() { for b in "${need[@]}"; do command -v "$b" >/dev/null || { echo "$b"; return; }; done; }
if [ -n "$(missing)" ] && command -v apt-get >/dev/null; then
  echo "installing slurm-wlm and munge"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || true
fi
[ -z "$(missing)" ] || skip "no $(missing) binary (apt-get install slurm-wlm munge)"

WORK=$(mktemp -d /tmp/harness-slurm.XXXXXX)
chmod 755 "$WORK"
export SLURM_CONF=$WORK/slurm.conf
daemons=()
cleanup() {
  local status=$?
  if [ ${#daemons[@]} -gt 0 ]; then
    scancel --quiet --full "--name=sweep-slurm-test" >/dev/null 2>&1
    for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
    kill "${daemons[@]}" 2>/dev/null
    for _ in $(seq 20); do kill -0 "${daemons[@]}" 2>/dev/null || break; sleep 0.25; done
    kill -9 "${daemons[@]}" 2>/dev/null
    wait 2>/dev/null
  fi
  if [ "$status" = 1 ] || [ -n "${KEEP:-}" ]; then echo "kept $WORK for inspection"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

logs() {
  for f in "$WORK"/slurmctld.log "$WORK"/slurmd.log "$WORK"/munge/munged.log; do
    [ -f "$f" ] && { echo "--- tail $f"; tail -n 15 "$f"; }
  done
}
fail() { echo "FAILED: $*"; logs; exit 1; }
daemon_skip() { echo "--- daemon logs"; logs; skip "$*"; }

# Two free TCP ports on localhost.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=$((20000 + ($$ % 20000)))
while ! port_free "$PORT" || ! port_free $((PORT + 1)); do PORT=$((PORT + 2)); done

# munge: a private daemon, key and socket.
mkdir -p "$WORK/munge" && chmod 700 "$WORK/munge"
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$WORK/munge/munge.key"
MUNGE_SOCKET=$WORK/munge/munge.socket
munged --foreground --force --socket="$MUNGE_SOCKET" --key-file="$WORK/munge/munge.key" \
  --log-file="$WORK/munge/munged.log" --pid-file="$WORK/munge/munged.pid" \
  --seed-file="$WORK/munge/munged.seed" >/dev/null 2>&1 &
daemons+=($!)
for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
[ -S "$MUNGE_SOCKET" ] || daemon_skip "munged did not start"

MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
mkdir -p "$WORK/state" "$WORK/spool"
cat > "$SLURM_CONF" <<EOF
ClusterName=harnesstest
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -D -c -f "$SLURM_CONF" >"$WORK/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >"$WORK/slurmd.out" 2>&1 &
daemons+=($!)
state=
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null | head -n 1)
  [ "$state" = idle ] && break
  kill -0 "${daemons[@]}" 2>/dev/null || break
  sleep 0.5
done
if [ "$state" != idle ]; then
  cat "$WORK/slurmctld.out" "$WORK/slurmd.out" 2>/dev/null | tail -n 5
  daemon_skip "the local Slurm did not come up (node state '${state:-none}')"
fi
echo "slurm up: $(sinfo -h -o '%P %D %T %C' | head -n 1) (ports $PORT, $((PORT + 1)))"

# A 2-run sweep: run 0 long enough to be signalled mid-run. (A requeued job waits cred_expire
# seconds before it starts again: 10 here, 120 by default.)
cd "$WORK" || fail "cd $WORK"
cat > sweep.yaml <<EOF
name: slurm-test
base:
  data: {corpus: $FIXTURE}
  model: {layers: 1, d_model: 32, heads: 2}
  train: {context: 16, batch_size: 4, steps: 1000}
  eval: {contexts: [L, 4L], windows: 2}
  run: {checkpoint_every: 5, log_every: 100, out_dir: $WORK/results}
runs:
  - {train.seed: 0}
  - {train.seed: 1, train.steps: 30}
EOF
"$HARNESS" sweep plan sweep.yaml || fail "sweep plan"
RUN0_DIR=$WORK/results/slurm-test/$("$HARNESS" sweep plan sweep.yaml | awk '/#0 / {print $1}')
out=$("$HARNESS" sweep submit sweep.yaml --slurm --partition debug --time 00:05:00 --cpus-per-task 1 \
      --max-parallel 2 2>&1) || fail "sweep submit: $out"
echo "$out"
JOB=$(echo "$out" | sed -n 's/^submitted job array \([0-9]*\).*/\1/p')
[ -n "$JOB" ] || fail "no job id in: $out"

# The time-limit warning to task 0, once it has checkpointed: it must checkpoint, requeue itself
# and resume.
deadline=$((SECONDS + TIMEOUT_S))
signalled=0
while [ $SECONDS -lt $deadline ]; do
  if [ $signalled = 0 ] && [ -f "$RUN0_DIR/run.h5" ] && [ -f "$RUN0_DIR/checkpoints.tsv" ]; then
    scancel --batch --signal=USR1 "${JOB}_0" && signalled=1 && echo "sent USR1 to ${JOB}_0"
  fi
  [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break
  sleep 0.2
done
[ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] || { squeue; fail "job array $JOB still queued after ${TIMEOUT_S}s"; }

status=$("$HARNESS" sweep status sweep.yaml) || fail "sweep status"
echo "$status"
for f in "$WORK"/results/slurm-test/slurm/"${JOB}"_*.out; do echo "--- $f"; cat "$f"; done
echo "$status" | grep -q "^2 of 2 runs done" || fail "runs not done"
[ -f "$WORK/results/slurm-test/slurm/${JOB}_0.out" ] && [ -f "$WORK/results/slurm-test/slurm/${JOB}_1.out" ] \
  || fail "per-task logs slurm/${JOB}_0.out and _1.out missing"
if [ $signalled = 1 ]; then
  grep -q "requeueing job" "$WORK/results/slurm-test/slurm/${JOB}_0.out" || fail "task 0 did not requeue itself after USR1"
  grep -q "resuming run" "$RUN0_DIR/train.log" "$WORK/results/slurm-test/slurm/${JOB}_0.out" \
    || fail "task 0 did not resume from its checkpoint"
  echo "task 0: checkpointed on USR1, requeued itself, resumed and finished"
else
  echo "note: task 0 finished before it could be signalled; requeue path not exercised"
fi
echo "job array $JOB ran both runs to done"

# Data parallel under Slurm: one run as 2 srun tasks (each reads SLURM_PROCID), then a sweep whose
# array task is 2 ranks (--ntasks-per-node 2: each rank finds rank 0 and the port from the step
# variables; srun --kill-on-bad-exit ends them all when one fails).
cat > dp.yaml <<YAML
data: {corpus: $FIXTURE}
model: {layers: 1, d_model: 32, heads: 2}
train: {context: 16, batch_size: 4, steps: 20}
eval: {contexts: [L], windows: 4}
run: {threads: 1, dist_timeout: 30}
YAML
DP_PORT=$((PORT + 2))
while ! port_free "$DP_PORT"; do DP_PORT=$((DP_PORT + 1)); done
timeout 120 srun --ntasks=2 --kill-on-bad-exit=1 --export=ALL,MASTER_ADDR=127.0.0.1,MASTER_PORT=$DP_PORT \
  "$HARNESS" train --config dp.yaml --run-dir "$WORK/dp-run" --no-progress >"$WORK/dp.out" 2>&1 \
  || { cat "$WORK/dp.out"; fail "srun --ntasks=2 harness train"; }
grep -q "data parallel: 2 ranks over gloo (Slurm variables)" "$WORK/dp-run/train.log" \
  || { cat "$WORK/dp.out" "$WORK/dp-run/train.log"; fail "the srun run did not train as 2 ranks"; }
echo "srun --ntasks=2: one run trained as 2 ranks"

cat > dp-sweep.yaml <<YAML
name: dp-sweep
base:
  data: {corpus: $FIXTURE}
  model: {layers: 1, d_model: 32, heads: 2}
  train: {context: 16, batch_size: 4, steps: 20}
  eval: {contexts: [L], windows: 4}
  run: {out_dir: $WORK/results, dist_timeout: 30}
runs:
  - {train.seed: 0}
YAML
out=$("$HARNESS" sweep submit dp-sweep.yaml --slurm --partition debug --time 00:05:00 --cpus-per-task 1 \
      --nodes-per-run 1 --ntasks-per-node 2 2>&1) || fail "sweep submit --ntasks-per-node 2: $out"
DP_JOB=$(echo "$out" | sed -n 's/^submitted job array \([0-9]*\).*/\1/p')
[ -n "$DP_JOB" ] || fail "no job id in: $out"
deadline=$((SECONDS + TIMEOUT_S))
while [ $SECONDS -lt $deadline ] && [ -n "$(squeue -h -j "$DP_JOB" 2>/dev/null)" ]; do sleep 0.2; done
status=$("$HARNESS" sweep status dp-sweep.yaml) || fail "sweep status dp-sweep"
for f in "$WORK"/results/dp-sweep/slurm/"${DP_JOB}"_*.out; do echo "--- $f"; cat "$f"; done
echo "$status" | grep -q "^1 of 1 runs done" || { echo "$status"; fail "the 2-rank sweep run is not done"; }
grep -q "data parallel: 2 ranks" "$WORK"/results/dp-sweep/*/train.log || fail "the sweep run did not train as 2 ranks"
echo "PASSED: slurm job array $JOB ran both runs to done; 2-rank runs through srun and sweep submit"
