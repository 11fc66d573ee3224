#!/usr/bin/env bash
# The daemon's CPU while nothing can change, with and without a staged run waiting for an
# approval: the two should be alike (a waiting run wakes the daemon only for a tag, a timer, a
# commit or a member event).
#
# Usage: benches/waiting-cpu.sh [GITFLEET_BINARY] [SECONDS]
# Starts `gitfleet sim` with 9 members and, twice, `gitfleet run` on a repository: once with a
# RollingUpdate placement (idle once settled), once with an External placement whose staged run
# waits for an approval before its second stage. Once there, it reads the daemon's utime+stime
# from /proc/PID/stat, the reconcile count from /metrics and the log's length, waits SECONDS
# (default 60) and reads them again.
set -euo pipefail
BIN=$(realpath "${1:-target/debug/gitfleet}")
SECS=${2:-60}
W=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$W"' EXIT

await() { # await DESCRIPTION COMMAND...: polls COMMAND for up to 60 s
  local what=$1; shift
  for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2; exit 1
}

{ echo "anonymousAuth: true"; echo "members:"; for i in $(seq 9); do echo "  - name: m$i"; done; } > "$W/fleet.yaml"
"$BIN" sim --fleet "$W/fleet.yaml" --kubeconfig-out "$W/kubeconfig" --admin 127.0.0.1:0 > "$W/sim.out" 2>&1 &
PIDS+=($!)
await "the simulator" grep -q ready "$W/sim.out"

repo() { # repo DIR STRATEGY WITH_RUN
  local dir=$1 strategy=$2 with_run=$3
  mkdir -p "$dir"; git -C "$dir" init -q -b main
  for i in $(seq 9); do
    local env=production; [ "$i" -le 6 ] && env=canary; [ "$i" -le 3 ] && env=staging
    printf -- "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {name: m%s, labels: {env: %s}}\nspec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}\n" "$i" "$env" >> "$dir/members.yaml"
  done
  cat > "$dir/app.yaml" <<Y
apiVersion: v1
kind: Namespace
metadata: {name: telemetry}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: collector, namespace: telemetry}
data: {version: '1'}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: telemetry}
spec:
  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: telemetry}]
  policy: {placementType: PickAll}
  strategy: {type: $strategy}
Y
  if [ "$with_run" = yes ]; then cat > "$dir/run.yaml" <<Y
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    beforeStageTasks: [{type: Approval}]
  - name: production
    labelSelector: {matchLabels: {env: production}}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateRun
metadata: {name: rollout-1}
spec: {placementName: telemetry, stagedRolloutStrategyName: three-stage, state: Run}
Y
  fi
  git -C "$dir" add -A
  GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t git -C "$dir" commit -qm fleet
}

measure() { # measure MODE STRATEGY WITH_RUN
  local mode=$1 dir="$W/$1"
  repo "$dir/repo" "$2" "$3"
  "$BIN" run --repo "$dir/repo" --kubeconfig "$W/kubeconfig" --state-dir "$dir/state" \
    --listen 127.0.0.1:0 --log-format json > "$dir/daemon.log" 2>&1 &
  local pid=$!; PIDS+=("$pid")
  await "the daemon's address" grep -q '"listen"' "$dir/daemon.log"
  local addr; addr=$(grep -o '"listen":"[^"]*"' "$dir/daemon.log" | head -1 | cut -d'"' -f4)
  if [ "$mode" = waiting ]; then
    await "the run to wait for its approval" sh -c "curl -sf http://$addr/api/v1/updateruns | grep -q 'rollout-1-before-canary'"
  else
    await "the rollout to settle" sh -c "curl -sf 'http://$addr/api/v1/placements?unready' | grep -q '\"placements\":\[\]'"
  fi
  # The last pushes' results and the availability checks after them.
  await "the daemon's first minute of quiet" sh -c "curl -sf http://$addr/readyz >/dev/null"
  sleep 5
  ticks() { awk '{print $14+$15}' "/proc/$pid/stat"; }
  looks() { curl -s "http://$addr/metrics" | awk '/^gitfleet_reconcile_duration_seconds_count/ {print $2}'; }
  local t0 l0 r0 t1 l1 r1
  t0=$(ticks); l0=$(wc -l < "$dir/daemon.log"); r0=$(looks)
  sleep "$SECS"
  t1=$(ticks); l1=$(wc -l < "$dir/daemon.log"); r1=$(looks)
  echo "$mode: daemon CPU over ${SECS} s: $((t1 - t0)) ticks of 1/$(getconf CLK_TCK) s; reconciles: $((r1 - r0)); log lines: $((l1 - l0))"
  kill "$pid"
}

measure idle RollingUpdate no
measure waiting External yes
