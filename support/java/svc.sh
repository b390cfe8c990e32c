#!/usr/bin/env bash
# The command pair of the foreign Java services (issue 30; kafka-clients, the reference client): what a user
# would configure as the stop / start / readiness commands of a consumer group, like `kubectl scale` or
# `systemctl stop`. The same verbs, files and exit codes as support/node/svc.sh (the KafkaJS services).
#
#   svc.sh [--run-dir DIR] define NAME consumer|share-consumer|producer [OPTIONS...]  # save NAME's definition
#   svc.sh [--run-dir DIR] start NAME consumer|share-consumer|producer [OPTIONS...]   # define NAME, start it
#   svc.sh [--run-dir DIR] start NAME...        # start each NAME from its saved definition
#   svc.sh [--run-dir DIR] stop [--timeout S] NAME...   # SIGTERM all, wait until all exited (default 20 s)
#   svc.sh [--run-dir DIR] ready NAME...        # exit 0 when each runs and its ready marker exists
#   svc.sh [--run-dir DIR] status NAME...       # print running/stopped per NAME (exit 0)
#
# KIND is the class io.kstate.fleet.Consumer, .ShareConsumer or .Producer (support/java/src), run with the
# classpath of the build kstate_support.java_services makes: $KSTATE_JAVA_BUILD (default .kstate/java-build
# of the repository)/classes and /libs/*; $KSTATE_FLEET_JAVA (default java) and $KSTATE_FLEET_JAVA_OPTS
# (default: a small heap, serial GC, C1 only: a quick start) pick the JVM.
# DIR defaults to $KSTATE_FLEET_RUN_DIR. The services write DIR/NAME.pid, .ready, .jsonl, .events.jsonl;
# their stdout/stderr go to DIR/NAME.log. Idempotent: starting a running service and stopping a stopped one
# succeed at once. Exit codes: 0 done, 1 a service did not start / did not exit in time / is not ready,
# 2 usage. A pid counts as NAME's only while that process is alive (not a zombie) and its command line
# carries `--name NAME`, so a stale pidfile or a recycled pid is never signalled.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JAVA=${KSTATE_FLEET_JAVA:-java}
JAVA_OPTS=${KSTATE_FLEET_JAVA_OPTS:--Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData}
BUILD=${KSTATE_JAVA_BUILD:-$HERE/../../.kstate/java-build}
RUN_DIR=${KSTATE_FLEET_RUN_DIR:-}

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2
  exit 2
}

while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --run-dir) RUN_DIR=${2:-}; shift 2 || usage ;;
    --run-dir=*) RUN_DIR=${1#*=}; shift ;;
    *) usage ;;
  esac
done
[[ $# -ge 1 && -n $RUN_DIR ]] || usage
ACTION=$1
shift
mkdir -p "$RUN_DIR" || exit 1

pid_of() { # print NAME's pid when it runs, else fail
  local name=$1 pid stat args
  pid=$(cat "$RUN_DIR/$name.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  stat=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [[ $stat == Z* ]] && return 1
  args=$(ps -ww -o args= -p "$pid" 2>/dev/null) || return 1
  [[ " $args " == *" --name $name "* ]] || return 1
  echo "$pid"
}

now_ms() { # a monotonic-enough clock in ms: EPOCHREALTIME (bash 5), else whole seconds
  if [[ -n ${EPOCHREALTIME:-} ]]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((10#$t / 1000))
  else
    echo $((SECONDS * 1000))
  fi
}

is_kind() { [[ $1 == consumer || $1 == share-consumer || $1 == producer ]]; }

main_class() { # KIND -> its class
  case $1 in
    consumer) echo io.kstate.fleet.Consumer ;;
    share-consumer) echo io.kstate.fleet.ShareConsumer ;;
    producer) echo io.kstate.fleet.Producer ;;
  esac
}

check_name() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] && ! is_kind "$1" || {
    echo "svc.sh: bad service name '$1'" >&2
    exit 2
  }
}

launch() { # NAME: start from DIR/NAME.spec; wait (bounded) until its pidfile names a live process
  local name=$1 kind spec
  if pid_of "$name" >/dev/null; then
    echo "$name: already running (pid $(pid_of "$name"))"
    return 0
  fi
  spec=$RUN_DIR/$name.spec
  [[ -f $spec ]] || { echo "svc.sh: $name was never defined (no $spec)" >&2; return 1; }
  local -a args
  mapfile -t args <"$spec"
  kind=${args[0]}
  rm -f "$RUN_DIR/$name.pid" "$RUN_DIR/$name.ready"
  [[ -d $BUILD/classes ]] || { echo "svc.sh: no build in $BUILD (kstate_support.java_services builds it)" >&2; return 1; }
  local -a detach=() opts
  command -v setsid >/dev/null && detach=(setsid)
  read -r -a opts <<<"$JAVA_OPTS"
  (cd "$HERE" && exec "${detach[@]}" nohup "$JAVA" "${opts[@]}" -cp "$BUILD/classes:$BUILD/libs/*" \
    "$(main_class "$kind")" --name "$name" --run-dir "$RUN_DIR" \
    "${args[@]:1}" >>"$RUN_DIR/$name.log" 2>&1 </dev/null) &
  local child=$! i
  for ((i = 0; i < 400; i++)); do # 20 s: a JVM on a busy machine
    if pid_of "$name" >/dev/null; then
      echo "$name: started (pid $(pid_of "$name"))"
      return 0
    fi
    if [[ -n $child ]] && ! kill -0 "$child" 2>/dev/null; then # java itself, or a setsid that forked (0)
      wait "$child" || break
      child=
    fi
    sleep 0.05
  done
  echo "svc.sh: $name did not start; last lines of $RUN_DIR/$name.log:" >&2
  tail -n 20 "$RUN_DIR/$name.log" >&2
  return 1
}

define() { # NAME KIND OPTIONS...: one argument a line, read back by launch
  [[ $# -ge 2 ]] && is_kind "$2" || usage
  check_name "$1"
  printf '%s\n' "${@:2}" >"$RUN_DIR/$1.spec.tmp" && mv "$RUN_DIR/$1.spec.tmp" "$RUN_DIR/$1.spec"
}

start() {
  if [[ $# -ge 2 ]] && is_kind "$2"; then
    define "$@" && launch "$1"
    return
  fi
  [[ $# -ge 1 ]] || usage
  local name rc=0
  for name in "$@"; do check_name "$name"; done
  for name in "$@"; do launch "$name" || rc=1; done
  return $rc
}

stop() {
  local timeout=20
  if [[ ${1:-} == --timeout ]]; then timeout=${2:-}; shift 2 || usage; fi
  [[ $# -ge 1 && $timeout =~ ^[0-9]+$ ]] || usage
  local name pid rc=0
  local -A pids=()
  for name in "$@"; do
    check_name "$name"
    if pid=$(pid_of "$name"); then
      kill -TERM "$pid" 2>/dev/null
      pids[$name]=$pid
    else
      rm -f "$RUN_DIR/$name.pid" "$RUN_DIR/$name.ready"
      echo "$name: stopped"
    fi
  done
  local deadline=$(($(now_ms) + timeout * 1000))
  for name in "${!pids[@]}"; do
    while pid_of "$name" >/dev/null && (($(now_ms) < deadline)); do sleep 0.05; done
    if pid_of "$name" >/dev/null; then
      echo "svc.sh: $name (pid ${pids[$name]}) did not exit within ${timeout} s of SIGTERM" >&2
      rc=1
    else
      rm -f "$RUN_DIR/$name.pid" "$RUN_DIR/$name.ready"
      echo "$name: stopped (pid ${pids[$name]})"
    fi
  done
  return $rc
}

ready() {
  [[ $# -ge 1 ]] || usage
  local name rc=0
  for name in "$@"; do
    check_name "$name"
    if ! pid_of "$name" >/dev/null; then
      echo "$name: not running"
      rc=1
    elif [[ ! -f $RUN_DIR/$name.ready ]]; then
      echo "$name: running, not ready"
      rc=1
    fi
  done
  return $rc
}

status() {
  local name
  for name in "$@"; do
    check_name "$name"
    if pid_of "$name" >/dev/null; then
      echo "$name: running (pid $(pid_of "$name"))$([[ -f $RUN_DIR/$name.ready ]] && echo ', ready')"
    else
      echo "$name: stopped"
    fi
  done
}

case $ACTION in
  define | start | stop | ready | status) "$ACTION" "$@" ;;
  *) usage ;;
esac
