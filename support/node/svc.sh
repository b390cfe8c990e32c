#!/usr/bin/env bash
# The command pair of the foreign KafkaJS services (issue 25): what a user would configure as the stop /
# start / readiness commands of a consumer group, like `kubectl scale` or `systemctl stop`.
#
#   svc.sh [--run-dir DIR] define NAME consumer|producer [OPTIONS...]  # save NAME's definition (.spec)
#   svc.sh [--run-dir DIR] start NAME consumer|producer [OPTIONS...]   # define NAME and start it
#   svc.sh [--run-dir DIR] start NAME...        # start each NAME from its saved definition
#   svc.sh [--run-dir DIR] stop [--timeout S] NAME...   # SIGTERM all, wait until all exited (default 20 s)
#   svc.sh [--run-dir DIR] ready NAME...        # exit 0 when each runs and its ready marker exists
#   svc.sh [--run-dir DIR] status NAME...       # print running/stopped per NAME (exit 0)
#
# DIR defaults to $KSTATE_FLEET_RUN_DIR. The services write DIR/NAME.pid, .ready, .jsonl, .events.jsonl;
# their stdout/stderr go to DIR/NAME.log. Idempotent: starting a running service and stopping a stopped one
# succeed at once. Exit codes: 0 done, 1 a service did not start / did not exit in time / is not ready,
# 2 usage. A pid counts as NAME's only while that process is alive (not a zombie) and its command line
# carries `--name NAME`, so a stale pidfile or a recycled pid is never signalled.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE=${KSTATE_FLEET_NODE:-node}

SVC_SCRIPT=${BASH_SOURCE[0]}
SVC_HOME=$HERE
SVC_KINDS=(consumer producer)
SVC_START_TRIES=200 # 10 s

service_argv() { SERVICE_ARGV=("$NODE" "$HERE/$1.js"); }

# shellcheck source=../svc-lib.sh
source "$HERE/../svc-lib.sh"
