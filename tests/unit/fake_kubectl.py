#!/usr/bin/env python3
"""A stand-in for kubectl + an API server (none can run here): applies MPIJobs and reports them ended.

The state lives in $FAKE_KUBECTL_STATE (a JSON file): applied job names and every call made. The launcher pod of
every applied job is reported terminated with exit code $FAKE_LAUNCHER_EXIT (the MPIJob Failed when non-zero).
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
    document = yaml.safe_load(Path(args[2]).read_text())
    name = document["metadata"]["name"]
    state["jobs"].append(name)
    out = f"mpijob.kubeflow.org/{name} created\n"
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
