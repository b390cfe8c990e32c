# The verbs of a foreign service's command pair (define / start / stop / ready / status), shared by the
# KafkaJS services (support/node/svc.sh) and the Java ones (support/java/svc.sh): sourced by each, which
# sets, before sourcing:
#   SVC_SCRIPT       the script itself (its header comment is the usage text)
#   SVC_HOME         the folder a service starts in
#   SVC_KINDS        the service kinds (an array)
#   SVC_START_TRIES  how many 0.05 s looks a start waits for the service's pidfile
#   service_argv     a function: KIND -> SERVICE_ARGV, the program and its fixed arguments (fails when the
#                    kind cannot run here, saying why)
# The script's header says what the verbs do and which files the services write.
set -u

RUN_DIR=${KSTATE_FLEET_RUN_DIR:-}

usage() { # the calling script's header comment
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$SVC_SCRIPT" >&2
  exit 2
}

is_kind() {
  local kind
  for kind in "${SVC_KINDS[@]}"; do [[ $1 == "$kind" ]] && return 0; done
  return 1
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
  local -a detach=() program
  service_argv "$kind" || return 1
  program=("${SERVICE_ARGV[@]}")
  command -v setsid >/dev/null && detach=(setsid)
  (cd "$SVC_HOME" && exec "${detach[@]}" nohup "${program[@]}" --name "$name" --run-dir "$RUN_DIR" \
    "${args[@]:1}" >>"$RUN_DIR/$name.log" 2>&1 </dev/null) &
  local child=$! i
  for ((i = 0; i < SVC_START_TRIES; i++)); do # every 0.05 s
    if pid_of "$name" >/dev/null; then
      echo "$name: started (pid $(pid_of "$name"))"
      return 0
    fi
    if [[ -n $child ]] && ! kill -0 "$child" 2>/dev/null; then # the service itself, or a setsid that forked (0)
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
