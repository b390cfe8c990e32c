"""``kstate``: the provider's command line. Imports no Airflow: it runs wherever confluent-kafka does.

kstate doctor --bootstrap-servers broker:9092 [--config JSON|@file] [--needs increase|state|all]
              [--allow promise,...] [--refresh] [--json]
kstate plan TOPIC [TOPIC ...] --partitions N --bootstrap-servers broker:9092 [--config JSON|@file]
            [--groups g1,g2] [--exclude g3] [--key-order preserve|drain|relax]
            [--consumers-stay never|auto|always] [--committing-groups g4] [--controlled-producers]
            [--control-topic T] [--json]

``kstate plan`` prints what a run of the increase to N partitions would do (the same plan as the kstate
page: each group's class, driver, key-order mark and lag, the broker check's last verdict), takes no lease
and changes nothing. Several co-partitioned topics (a join's inputs, grown together in one run) give one
plan: every topic with its count now and after, every group at risk on any of them once, with the topics it
reads; topics whose counts differ now are refused, naming each count. Exit codes: 0 a run could go, 3 a run would be refused (named), 4 the cluster did
not answer, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.plan import Plan

COMMANDS = ("doctor", "plan")


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``kstate <command> ...``; return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr if args and args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    if args[0] == "plan":
        return plan(args[1:])
    from airflow_provider_kstate.doctor.__main__ import main as doctor

    return doctor(args[1:])


def _plan_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kstate plan", description="What an increase would do; changes nothing."
    )
    parser.add_argument(
        "topic", nargs="+", help="the topic; several: co-partitioned topics grown together in one run"
    )
    parser.add_argument(
        "--partitions", type=int, default=None, help="the target count (default: the current)"
    )
    parser.add_argument("--bootstrap-servers", default="")
    parser.add_argument("--config", default="", help="librdkafka settings as JSON, or @file")
    parser.add_argument(
        "--groups", default="", help="comma-separated groups to protect (default: every group at risk)"
    )
    parser.add_argument("--exclude", default="", help="comma-separated groups left alone (RISK ACCEPTED)")
    parser.add_argument("--key-order", choices=["preserve", "drain", "relax"], default="preserve")
    parser.add_argument(
        "--consumers-stay",
        choices=["never", "auto", "always"],
        default="never",
        help="whether live groups that give evidence of their position stay in their groups",
    )
    parser.add_argument(
        "--committing-groups",
        default="",
        help="comma-separated groups whose consumers commit every assigned partition's position",
    )
    parser.add_argument(
        "--controlled-producers",
        action="store_true",
        help="the topics' producers are ControlledProducers (producer_drivers {'control': 'control'})",
    )
    parser.add_argument("--control-topic", default="_kstate_control")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (the page's document)")
    return parser


def plan(argv: list[str]) -> int:
    """``kstate plan``: preview an increase (no Airflow, no lease, nothing changed)."""
    from airflow_provider_kstate.doctor.__main__ import cluster_config

    parser = _plan_parser()
    args = parser.parse_args(argv)
    if args.partitions is not None and args.partitions < 1:
        parser.error("--partitions must be at least 1")
    try:
        document, lines = _preview(args, cluster_config(args))
    except Exception as exc:  # noqa: BLE001 - a refusal or an unreachable cluster, named, is the answer
        return _refused(exc)
    print(json.dumps(document, indent=2, default=str) if args.json else "\n".join(lines))
    return 3 if document["cannot_drive"] else 0


def _preview(args: argparse.Namespace, config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    from airflow_provider_kstate.cluster.admin import ClusterAdmin
    from airflow_provider_kstate.increase.preview import preview_lines
    from airflow_provider_kstate.increase.topic_set import preview_topic_set

    admin = ClusterAdmin(config, timeout=args.timeout, name=str(config.get("bootstrap.servers")))
    admin.check_connection()  # a refused SASL or TLS handshake: named at once (KafkaAuthenticationError)
    plan, verdict = plan_of(admin, args, config)
    document = preview_topic_set(admin, plan, verdict)
    return document, preview_lines(document, plan)


def plan_of(admin: Any, args: argparse.Namespace, config: dict[str, Any]) -> tuple[Plan, dict[str, Any]]:
    """The plan of ``kstate plan``'s request (the one planner: the ACLs a run needs checked, the broker
    doctor's cached verdict read, never probed) and that verdict as the preview shows it."""
    from airflow_provider_kstate.cluster.control import Controller
    from airflow_provider_kstate.doctor.diagnosis import last_verdict
    from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
    from airflow_provider_kstate.increase.drivers import CONTROL
    from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC
    from airflow_provider_kstate.increase.planner import AccessScope, plan_increase
    from airflow_provider_kstate.increase.request import PlanRequest

    request = PlanRequest(
        topics=tuple(args.topic),
        partitions=args.partitions,
        consumer_groups=tuple(g for g in args.groups.split(",") if g),
        exclude_groups=tuple(g for g in args.exclude.split(",") if g),
        key_order=args.key_order,
        consumers_stay=args.consumers_stay,
        committing_groups=tuple(g for g in args.committing_groups.split(",") if g),
        producer_drivers={"control": CONTROL} if args.controlled_producers else {},
    )
    shown: dict[str, Any] = {"checked": False}

    def trust() -> bool:  # the cached verdict, read once the ACLs are checked
        verdict = last_verdict(config, args.timeout)
        if verdict is not None:
            shown.update(verdict.shown())
        return verdict is not None and verdict.kept(SHARE_NEW_PARTITIONS)

    present = Controller(admin, args.control_topic).client_piece_clients
    access = AccessScope((DEFAULT_LEASE_TOPIC, args.control_topic), config)
    return plan_increase(admin, request, present, access=access, trust=trust), shown


def _refused(exc: Exception) -> int:
    from airflow_provider_kstate.errors import BrokerUnavailableError, KStateError

    if not isinstance(exc, KStateError):
        raise exc
    print(f"REFUSED: {exc}", file=sys.stderr)
    return 4 if isinstance(exc, BrokerUnavailableError) else 3


if __name__ == "__main__":
    raise SystemExit(main())
