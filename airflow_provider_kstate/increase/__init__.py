"""The safe partition increase as a domain: the typed plan, the steps, the safety rule and their reports.

The layers, each importing only those below it::

    task_groups/, operators/, sensors/, triggers/   Airflow: arguments, XCom, logs, deferral
    hooks/                                          connections -> confluent-kafka clients
    increase/                                       plan, steps, safety rule, reports (ports.py: what it
                                                    needs of a cluster, as protocols the hooks satisfy)
    store/, client/, spark_apps/                    no Airflow import at all
"""
