"""``kstate``: the provider's command line. Imports no Airflow: it runs wherever confluent-kafka does.

kstate doctor --bootstrap-servers broker:9092 [--config JSON|@file] [--needs increase|state|all]
              [--allow promise,...] [--refresh] [--json]
"""

from __future__ import annotations

import sys

COMMANDS = ("doctor",)


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``kstate <command> ...``; return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr if args and args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    from airflow_provider_kstate.doctor.__main__ import main as doctor

    return doctor(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
