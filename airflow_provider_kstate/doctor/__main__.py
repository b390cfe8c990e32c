"""``python -m airflow_provider_kstate.doctor`` (also ``kstate doctor``): check a cluster's Kafka promises.

    python -m airflow_provider_kstate.doctor --bootstrap-servers broker:9092 [--config '{"security.protocol": ...}']
        [--needs increase|state|all] [--allow latest_offset,...] [--refresh] [--json]

Exit codes: 0 every needed promise holds (or is allowed), 3 a needed promise is broken, 2 bad arguments.
The configuration (SASL passwords) is never printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from airflow_provider_kstate.doctor.diagnosis import diagnose
from airflow_provider_kstate.doctor.promises import NEEDS, Needs, check_names
from airflow_provider_kstate.doctor.verdict import BrokerDeviation


def cluster_config(args: argparse.Namespace) -> dict[str, Any]:
    """The librdkafka settings the command names: ``--config`` (JSON or @file) with ``--bootstrap-servers``."""
    extra = args.config or "{}"
    if extra.startswith("@"):
        with open(extra[1:], encoding="utf-8") as handle:
            extra = handle.read()
    try:
        config = json.loads(extra)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--config is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(config, dict):
        raise SystemExit("--config must be a JSON object of librdkafka settings")
    if args.bootstrap_servers:
        config["bootstrap.servers"] = args.bootstrap_servers
    if not config.get("bootstrap.servers"):
        raise SystemExit("name the cluster with --bootstrap-servers or bootstrap.servers in --config")
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kstate doctor", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="")
    parser.add_argument("--config", default="", help="librdkafka settings as JSON, or @file")
    parser.add_argument("--needs", choices=[str(n) for n in Needs], default=str(Needs.ALL))
    parser.add_argument("--allow", default="", help="comma-separated promise names to accept (RISK ACCEPTED)")
    parser.add_argument("--refresh", action="store_true", help="re-run the behavioural checks now")
    parser.add_argument("--ttl", type=float, default=24 * 3600.0, help="seconds a cached verdict stays valid")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        allow = check_names(args.allow, "--allow")
    except ValueError as exc:
        parser.error(str(exc))
    verdict, cached = diagnose(cluster_config(args), refresh=args.refresh, ttl=args.ttl)
    if args.json:
        print(json.dumps({**verdict.to_dict(), "cached": cached}, indent=2))
    else:
        print("\n".join(verdict.lines()))
        print("(behavioural checks from the cache; --refresh re-runs them)" if cached else "(checked now)")
    try:
        needs = Needs(args.needs)
        for promise in verdict.refuse(NEEDS[needs], allow, what=f"the {needs} checks"):
            print(verdict.risk_line(promise, f"the {needs} checks"), file=sys.stderr)
    except BrokerDeviation as exc:
        print(f"REFUSED: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
