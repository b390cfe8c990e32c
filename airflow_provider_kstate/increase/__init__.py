"""The safe partition increase as a domain: the typed plan, the steps, the safety rule and their reports.

The layers, each importing only those below it::

    task_groups/, operators/, sensors/, triggers/   Airflow: arguments, XCom, logs, deferral
    hooks/                                          connections -> confluent-kafka clients, report files
    lease_rules.py                                  the lease: owners, takeover rule, LeaseKeeper
    task_edge.py                                    where a task ends: fails it on a non-retryable error
    ------------------------------------------------ the domain: no Airflow, no Spark import
    increase/                                       plan, steps, safety rule, reports (ports.py: what it
                                                    needs of a cluster and a file store, as protocols the
                                                    hooks satisfy)
    store/, client_piece/                           the state store, the client piece
    errors.py                                       the provider's errors (each says if it is retryable)
"""
