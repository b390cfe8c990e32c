# Roll a snapshot back to an older version (docs: the snapshot layout). tests/docs/test_docs_examples.py
# runs it on a snapshot folder of its own (the path and the version replaced) and reads the pointer back.

# [START rollback]
cd /data/snapshots/totals
ls -d v-*                                  # the versions on disk
python - <<'EOF'
import os
from airflow_provider_kstate.store.layout import pointer_bytes
open("_kstate_current.json.tmp", "wb").write(pointer_bytes("v-20261122T020000-77b0e2"))
os.replace("_kstate_current.json.tmp", "_kstate_current.json")
EOF
# [END rollback]
