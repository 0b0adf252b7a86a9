#!/usr/bin/env python3
"""A stand-in for kubectl + an API server (none can run here): applies MPIJobs and batch Jobs and reports them ended.

The state lives in $FAKE_KUBECTL_STATE (a JSON file): applied job names and every call made. The launcher pod of
every applied MPIJob is reported terminated with exit code $FAKE_LAUNCHER_EXIT (the MPIJob Failed when non-zero).
An applied batch Job is Complete, or Failed with status.failedIndexes $FAKE_FAILED_INDEXES when that is set and
the Job is an Indexed one (whose name holds $FAKE_FAILED_JOB, when set); 'logs job/NAME' prints $FAKE_JOB_LOG.
"""

import json
import os
import sys
from pathlib import Path

import yaml

args = [a for a in sys.argv[1:] if not a.startswith("--request-timeout")]
state_file = Path(os.environ["FAKE_KUBECTL_STATE"])
state = json.loads(state_file.read_text()) if state_file.exists() else {"jobs": [], "calls": []}
state["calls"].append(args)
code = int(os.environ.get("FAKE_LAUNCHER_EXIT", "0"))
out = ""
if args[:2] == ["apply", "-f"]:
    for document in yaml.safe_load_all(Path(args[2]).read_text()):
        name = document["metadata"]["name"]
        state["jobs"].append(name)
        state.setdefault("specs", {})[name] = document["spec"]
        kind = "mpijob.kubeflow.org" if document["kind"] == "MPIJob" else "job.batch"
        out += f"{kind}/{name} created\n"
elif args[:2] == ["delete", "job"]:
    state.setdefault("deleted", []).append(args[2])
elif args[:2] == ["get", "job"] and "json" in args:
    spec = state.get("specs", {}).get(args[2])
    if spec is None:
        sys.stderr.write(f'Error from server (NotFound): jobs.batch "{args[2]}" not found\n')
        sys.exit(1)
    fails = spec.get("completionMode") == "Indexed" and os.environ.get("FAKE_FAILED_JOB", "") in args[2]
    failed = os.environ.get("FAKE_FAILED_INDEXES", "") if fails else ""
    status = {"failed": 1, "failedIndexes": failed} if failed else {"succeeded": spec.get("completions", 1)}
    status["conditions"] = [{"type": "Failed" if failed else "Complete", "status": "True"}]
    out = json.dumps({"status": status})
elif args[:1] == ["logs"] and args[1].startswith("job/"):
    out = os.environ.get("FAKE_JOB_LOG", "")
elif args[:2] == ["get", "mpijob"] and "json" in args:
    if args[2] not in state["jobs"]:
        sys.stderr.write(f'Error from server (NotFound): mpijobs.kubeflow.org "{args[2]}" not found\n')
        sys.exit(1)
    ended = "Failed" if code else "Succeeded"
    out = json.dumps({"status": {"conditions": [{"type": "Running", "status": "False"}, {"type": ended, "status": "True"}]}})
elif args[:2] == ["get", "pods"] and "json" in args:
    selector = args[args.index("-l") + 1]
    role = dict(part.split("=") for part in selector.split(","))["nsyskit/role"]
    items = []
    if role == "launcher":
        items = [{"metadata": {"name": "launcher-x", "creationTimestamp": "2026-01-01T00:00:00Z"},
                  "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": code}}}]}}]
    out = json.dumps({"items": items})
else:
    sys.stderr.write(f"fake kubectl: unexpected call {args}\n")
    sys.exit(2)
state_file.write_text(json.dumps(state))
sys.stdout.write(out)
