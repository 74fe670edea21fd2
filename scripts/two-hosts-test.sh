#!/usr/bin/env bash
# Data parallel across two hosts, on one machine: two network namespaces joined by a veth pair
# stand for two hosts (172.31.213.1 "hosta", 172.31.213.2 "hostb"), each with its own /etc/hosts that
# maps its own name to 127.0.1.1 as Debian writes it. Ranks 0, 1 run on hosta and 2, 3 on hostb
# (torchrun's variables, LOCAL_WORLD_SIZE 2 of WORLD_SIZE 4, MASTER_ADDR=hosta); the run must
# equal one process. Before the harness chose Gloo's address for spanning worlds, hosta's ranks
# listened on loopback and hostb's ranks, which connect to them (Gloo connects from the higher
# address, and 172.31.x > 127.x), waited out the timeout. Traffic stays inside the two namespaces.
#
#   scripts/two-hosts-test.sh [path/to/harness]     (a CTest; exit 77 = skipped: not root, no netns)
set -uo pipefail
cd "$(dirname "$0")/.."
HARNESS=$(realpath "${1:-build/harness}")
[ "$(id -u)" = 0 ] || { echo "two-hosts-test: skipped (needs root for network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "two-hosts-test: skipped (no ip command: iproute2)"; exit 77; }
A=harness-a-$$ B=harness-b-$$
WORK=$(mktemp -d /tmp/two-hosts-test.XXXXXX)
cleanup() {
  ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null
  rm -rf "/etc/netns/$A" "/etc/netns/$B" "$WORK"
}
trap cleanup EXIT
ip netns add "$A" 2>/dev/null || { echo "two-hosts-test: skipped (cannot create a network namespace)"; exit 77; }
ip netns add "$B" || exit 1
# veth names are per namespace once moved; made with unique names, then moved.
ip link add "va$$" type veth peer name "vb$$" || { echo "two-hosts-test: skipped (no veth)"; exit 77; }
ip link set "va$$" netns "$A" && ip link set "vb$$" netns "$B" || exit 1
ip -n "$A" addr add 172.31.213.1/24 dev "va$$" && ip -n "$B" addr add 172.31.213.2/24 dev "vb$$" || exit 1
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "va$$" up && ip -n "$B" link set "vb$$" up || exit 1
mkdir -p "/etc/netns/$A" "/etc/netns/$B"  # `ip netns exec` mounts these over /etc/hosts
printf '127.0.0.1 localhost\n127.0.1.1 hosta\n172.31.213.2 hostb\n' > "/etc/netns/$A/hosts"
printf '127.0.0.1 localhost\n127.0.1.1 hostb\n172.31.213.1 hosta\n' > "/etc/netns/$B/hosts"

cat > "$WORK/run.yaml" <<YAML
data: {corpus: '$PWD/tests/data/sotu', data_dir: '$WORK/data'}
model: {layers: 1, d_model: 32, heads: 2}
train: {context: 32, batch_size: 8, steps: 10, seed: 1}
eval: {contexts: [L], windows: 4}
run: {threads: 1, dist_timeout: 30}
YAML
"$HARNESS" train --no-progress --config "$WORK/run.yaml" --run-dir "$WORK/one" >"$WORK/one.log" 2>&1 \
  || { cat "$WORK/one.log"; echo "two-hosts-test: FAILED (one process)"; exit 1; }

pids=()
for rank in 0 1 2 3; do
  ns=$A; [ $rank -ge 2 ] && ns=$B
  ip netns exec "$ns" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=hosta MASTER_PORT=29611 timeout 120 "$HARNESS" train --no-progress \
    --config "$WORK/run.yaml" --run-dir "$WORK/four" >"$WORK/rank$rank.log" 2>&1 &
  pids+=($!)
done
status=0
for rank in 0 1 2 3; do
  wait "${pids[$rank]}" || { echo "--- rank $rank"; cat "$WORK/rank$rank.log"; status=1; }
done
[ $status = 0 ] || { echo "two-hosts-test: FAILED (a rank)"; exit 1; }
"${PYTHON:-.venv/bin/python}" - "$WORK/one/run.h5" "$WORK/four/run.h5" <<'PY' || { echo "two-hosts-test: FAILED (results differ)"; exit 1; }
import sys, h5py
one, four = (h5py.File(p, "r") for p in sys.argv[1:])
assert four["config"].attrs["world_size"] == 4, four["config"].attrs["world_size"]
a, b = one["train/loss"][:], four["train/loss"][:]
assert len(a) == len(b) == 10, (len(a), len(b))
worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
assert worst < 1e-5, worst
print(f"4 ranks on 2 hosts = 1 process: train loss within {worst:.1e} over {len(a)} steps")
PY
echo "two-hosts-test: PASSED"
