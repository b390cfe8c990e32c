"""The cluster as the provider talks to it, without Airflow: the admin verbs (:mod:`.admin`), the control
channel's controller side (:mod:`.control`) and the lease log's transport (:mod:`.lease_log`). The hooks
build these from an Airflow connection; the ``kstate`` command line from its arguments."""
