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

SVC_SCRIPT=${BASH_SOURCE[0]}
SVC_HOME=$HERE
SVC_KINDS=(consumer share-consumer producer)
SVC_START_TRIES=400 # 20 s: a JVM on a busy machine

main_class() { # KIND -> its class
  case $1 in
    consumer) echo io.kstate.fleet.Consumer ;;
    share-consumer) echo io.kstate.fleet.ShareConsumer ;;
    producer) echo io.kstate.fleet.Producer ;;
  esac
}

service_argv() {
  [[ -d $BUILD/classes ]] || { echo "svc.sh: no build in $BUILD (kstate_support.java_services builds it)" >&2; return 1; }
  local -a opts
  read -r -a opts <<<"$JAVA_OPTS"
  SERVICE_ARGV=("$JAVA" "${opts[@]}" -cp "$BUILD/classes:$BUILD/libs/*" "$(main_class "$1")")
}

# shellcheck source=../svc-lib.sh
source "$HERE/../svc-lib.sh"
