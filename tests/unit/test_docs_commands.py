"""The commands in README.md and docs/ are real: every fenced `invoke`/`nsyskit` line names real tasks and flags of
the Invoke collection, and the ones that need no engine, cluster or registry run and exit 0.

Which commands run: `--help`/`--list`, `config`, `--dry-run` forms, and `analyze`/`nccl-log`/`nccl-tests` whose paths exist; each
runs in a fresh project folder (the repo's tasks.py, .env, profiles and build inputs) whose .env sets an ECR
REGISTRY, as a user following the docs has. Lines with placeholders (`<run-id>`, `[--wait]`, `…`) are checked
for names only.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:\$ )?((?:[A-Z][A-Z0-9_]*=\S* )*)(invoke|nsyskit)(\s.*)?$")
PROGRAM_VALUED = {"--profile", "--env-file"}  # flags of the program itself that take a value
CORE_FLAGS = {"--list", "-l", "--help", "-h", "--version", "-V", "--echo", "-e", "--dry", "-R", "--complete"}
RUNS_WITHOUT_ENGINE = {"config"}  # tasks that only read the configuration
READS_FILES = {"analyze", "nccl-log", "nccl-tests"}  # run when every path they are given exists
PROJECT_FILES = ("tasks.py", ".env", "profiles", "Dockerfile", "Container-Root", "k8s", "slurm")
DOC_REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"


@dataclass(frozen=True)
class DocCommand:
    """One command line of a fenced block: where it is, its words (comments and env assignments apart)."""

    where: str
    env: dict[str, str]
    words: list[str]

    @property
    def placeholders(self) -> bool:
        return any(re.search(r"[<>…\[\]]|\.\.\.", w) for w in self.words)


def doc_commands() -> list[DocCommand]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in re.finditer(r"```[a-z]*\n(.*?)```", text, flags=re.S):
            first = text[: match.start()].count("\n") + 2
            for offset, line in enumerate(match.group(1).splitlines()):
                parsed = COMMAND.match(line.strip())
                if not parsed:
                    continue
                words = shlex.split(line.strip(), comments=True)
                env = dict(w.split("=", 1) for w in words if COMMAND.match(w) is None and re.match(r"^[A-Z][A-Z0-9_]*=", w))
                words = words[len(env) :]
                if " > " in line:  # a redirection: the words after it are a file, not arguments
                    words = words[: words.index(">")]
                found.append(DocCommand(f"{doc.relative_to(ROOT)}:{first + offset}", env, words))
    return found


def collection():
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.remove(str(ROOT))
    return tasks.ns


def flags_of(task) -> tuple[set[str], set[str], list[str]]:
    """(flags that take a value, flags that take none, positional names) of an Invoke task."""
    valued, bare, positional = set(), set(), []
    for argument in task.get_arguments():
        names = {("--" if len(n) > 1 else "-") + n for n in argument.names}
        if argument.kind is bool:
            bare |= names | {f"--no-{argument.names[0]}"}
        else:
            valued |= names
        if argument.positional:
            positional.append(argument.names[0])
    return valued, bare, positional


def check(words: list[str], ns) -> tuple[list[str], list[str]]:
    """(problems, task names) of one command's words after `invoke`/`nsyskit`."""
    problems, tasks, i = [], [], 1
    current, valued, bare, positional = None, set(), set(), []
    while i < len(words):
        word = words[i].strip("[]")
        if word.startswith("-") and word not in ("-", "--"):
            name, program = word.split("=", 1)[0], current is None
            if name in valued or program and name in PROGRAM_VALUED:
                i += 0 if "=" in word else 1  # its value is the next word
            elif name not in bare and not (program and name in CORE_FLAGS):
                problems.append(f"{name} is not a flag of {current or 'the program'}")
        elif word in ns.task_names:
            current = word
            tasks.append(word)
            valued, bare, positional = flags_of(ns[word])
        elif current is not None and positional:
            positional.pop(0)
        elif current is None and tasks == [] and "--help" in words[:i]:
            problems.append(f"{word} is not a task")
        else:
            problems.append(f"{word!r} is not a task, nor an argument of {current or 'the program'}")
        i += 1
    return problems, tasks


COMMANDS = doc_commands()


def test_the_docs_have_commands():
    where = {c.where.split(":")[0] for c in COMMANDS}
    assert "README.md" in where and len(COMMANDS) >= 20


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_doc_command_names_real_tasks_and_flags(command):
    problems, _ = check(command.words, collection())
    assert problems == [], f"{command.where}: {' '.join(command.words)}"


def test_a_misspelt_flag_or_task_is_caught():
    ns = collection()
    assert check(["invoke", "analyze", "reports/x", "--jsn"], ns)[0] == ["--jsn is not a flag of analyze"]
    assert check(["invoke", "analyse", "reports/x"], ns)[0]
    assert check(["invoke", "deploy", "--k8s", "--dry-run"], ns)[0] == []
    assert check(["invoke", "build", "push"], ns) == ([], ["build", "push"])


def runnable(command: DocCommand, ns, project: Path) -> bool:
    problems, tasks = check(command.words, ns)
    if problems or command.placeholders:
        return False
    if not tasks or "--help" in command.words or "-h" in command.words[:2]:
        return True
    if "--dry-run" in command.words or all(t in RUNS_WITHOUT_ENGINE for t in tasks):
        return True
    paths = [w for w in command.words[1:] if not w.startswith("-") and w not in tasks and "/" in w]
    return set(tasks) <= READS_FILES and bool(paths) and all((project / p.split(",")[0]).exists() for p in paths)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder as a user has one: the repo's tasks.py, settings and build inputs, REGISTRY set in .env."""
    folder = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, folder / name)
    with open(folder / ".env", "a") as env:
        env.write(f"\nREGISTRY={DOC_REGISTRY}\nSLURM_SHARED_DIR={folder}\n")  # the project on the shared file system
    (folder / "tests").symlink_to(ROOT / "tests")
    return folder


def test_doc_commands_that_need_no_cluster_run(project):
    ns = collection()
    ran = []
    base = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}
    for command in COMMANDS:
        if not runnable(command, ns, project):
            continue
        program = [sys.executable, "-m", command.words[0]]  # invoke, or the nsyskit command of this install
        done = subprocess.run([*program, *command.words[1:]], cwd=project, env={**base, **command.env},
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{command.where}: {' '.join(command.words)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        ran.append(command.where)
    assert len(ran) >= 5, ran


@pytest.mark.skipif(Path("/fsx").exists(), reason="this machine has /fsx: it is not a laptop off the cluster")
def test_the_docs_slurm_dry_run_previews_on_a_laptop(tmp_path):
    # The documented preview, where a user tries it before going to the cluster: SLURM_SHARED_DIR is the committed
    # /fsx, absent here. It renders, prints the script and warns; it exits 0.
    dry_runs = [c for c in COMMANDS if {"deploy", "--slurm", "--dry-run"} <= set(c.words) and not c.placeholders]
    assert dry_runs, "the docs show 'invoke deploy --slurm --dry-run'"
    for name in PROJECT_FILES:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tmp_path / name)
    base = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}
    for command in dry_runs:
        done = subprocess.run([sys.executable, "-m", command.words[0], *command.words[1:]], cwd=tmp_path,
                              env={**base, **command.env}, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{command.where}: {done.stderr[-2000:]}"
        assert "#SBATCH --nodes=" in done.stdout and "a real submit would refuse: SLURM_SHARED_DIR='/fsx'" in done.stderr
