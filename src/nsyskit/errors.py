"""The one exception root of nsyskit and its subclasses, each carrying the evidence a user needs."""

from __future__ import annotations

from collections.abc import Sequence


class NsyskitError(Exception):
    """Root of every error a user can cause or fix; tasks turn it into one line and a non-zero exit."""

    exit_code = 1
    fix = ""  # what the user can do about it; subclasses with their own fields set it before calling super()

    def __init__(self, message: str = "", fix: str = "") -> None:
        if fix:
            self.fix = fix
            message = f"{message}; fix: {fix}"
        super().__init__(message)

    def one_line(self) -> str:
        """The message as shown by the command line: the first line of str(self)."""
        text = str(self).strip()
        return text.splitlines()[0] if text else type(self).__name__


class UsageError(NsyskitError):
    """Task flags that cannot go together or a value a flag does not take: names the flags and the fix."""


class ConfigError(NsyskitError):
    """A configuration value is wrong: names the key, the value, where it came from and the fix."""

    def __init__(self, key: str, value: object, problem: str, fix: str, source: str = "") -> None:
        self.key, self.value, self.problem, self.fix, self.source = key, value, problem, fix, source
        where = f" (from {source})" if source and source != "default" else ""
        super().__init__(f"{key}={value!r}{where}: {problem}; fix: {fix}")


class ConfigFileError(NsyskitError):
    """A settings file (.env, a profile) cannot be used: names the file (and line), what is wrong and the fix."""

    def __init__(self, path: object, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{self.path}: {problem}; fix: {fix}")


class ConfigErrors(NsyskitError):
    """Several configuration problems found at once; str() lists one per line."""

    def __init__(self, errors: Sequence[NsyskitError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    def one_line(self) -> str:
        """The first problem, and how many more 'invoke config --check' lists."""
        first = str(self.errors[0])
        more = len(self.errors) - 1
        return first + (f" (and {more} more problem(s): run 'invoke config --check')" if more else "")


class EngineUnavailable(NsyskitError):
    """No Docker engine could be reached or started; says what to install or start."""


class CommandError(NsyskitError):
    """An external command failed: carries the command, its exit code and the tail of its stderr."""

    def __init__(self, what: str, cmd: Sequence[str], returncode: int, stderr: str = "") -> None:
        self.what, self.cmd, self.returncode, self.stderr = what, list(cmd), returncode, stderr
        tail = " | ".join(line for line in stderr.strip().splitlines()[-3:] if line.strip())
        super().__init__(
            f"{what} failed: '{' '.join(self.cmd)}' exited {returncode}" + (f": {tail}" if tail else "")
        )


class AwsError(NsyskitError):
    """An AWS API call failed: carries the operation (e.g. CreateRepository) and the service's error code."""

    def __init__(self, message: str, operation: str = "", code: str = "", fix: str = "") -> None:
        self.operation, self.code = operation, code
        super().__init__(message, fix)


class AwsCredentialsMissing(AwsError):
    """No AWS credentials were found, or the API rejected them; says how to provide them."""


class AwsAccessDenied(AwsError):
    """The credentials lack an IAM permission: carries the IAM action (e.g. ecr:CreateRepository)."""

    def __init__(self, message: str, action: str, operation: str = "", code: str = "", fix: str = "") -> None:
        self.action = action
        super().__init__(message, operation, code, fix)


class AwsEndpointUnreachable(AwsError):
    """The AWS API endpoint could not be reached (network, proxy, or a wrong AWS_ENDPOINT_URL*)."""


class RegistryError(NsyskitError):
    """A registry login, push or pull failed: carries the registry host, the operation and the registry's own message."""

    def __init__(self, message: str, registry: str = "", operation: str = "", detail: str = "", fix: str = "") -> None:
        self.registry, self.operation, self.detail = registry, operation, detail
        super().__init__(message, fix)


class RegistryAuthError(RegistryError):
    """The registry rejected the credentials (or they are missing for a registry that needs them)."""


class RegistryUnreachable(RegistryError):
    """The registry did not answer, even after retries with backoff."""


class TagImmutable(RegistryError):
    """The tag already names a different image in a repository with immutable tags."""


class ImageNotBuilt(NsyskitError):
    """The image to push is not in the local engine: carries the references looked for."""

    def __init__(self, message: str, refs: Sequence[str] = (), fix: str = "") -> None:
        self.refs = list(refs)
        super().__init__(message, fix)


class ClusterError(NsyskitError):
    """kubectl could not do what was asked of the cluster: carries the command, its exit code and kubectl's stderr."""

    def __init__(
        self, message: str, cmd: Sequence[str] = (), returncode: int | None = None, stderr: str = "", fix: str = ""
    ) -> None:
        self.cmd, self.returncode, self.stderr = list(cmd), returncode, stderr
        super().__init__(message, fix)


class ClusterUnreachable(ClusterError):
    """No Kubernetes API server answered (no kubeconfig, wrong context, network): says how to point kubectl at one."""


class KubectlMissing(ClusterError):
    """kubectl is not installed: says how to install it."""


JOB_LABELS = {"local": "local run", "slurm": "Slurm job", "k8s": "MPIJob"}  # what a job is called per target


class JobFailed(NsyskitError):
    """A job of any target (local run, Slurm job, MPIJob) ended non-zero: the task exits with the job's exit code.

    Carries the evidence: target, job id, final state, exit code, where its logs are, the reason and the log tail.
    """

    def __init__(
        self, target: str, job_id: str, state: str, exit_code: int, logs: object, reason: str = "",
        log_tail: Sequence[str] = (), reports: object = "",
    ) -> None:  # fmt: skip
        self.target, self.job_id, self.state, self.job_exit_code = target, str(job_id), state, exit_code
        label = JOB_LABELS.get(target, f"{target} job")
        self.logs, self.reason, self.log_tail, self.reports = str(logs), reason, list(log_tail), str(reports or "")
        # Exit with the job's own code; 1 when it has none (CANCELLED, TIMEOUT, a launcher that never ran...).
        self.exit_code = exit_code if 0 < exit_code < 256 else 1
        why = f": {reason}" if reason else ""
        collected = f"; reports collected in {self.reports}" if self.reports and self.reports != self.logs else ""
        super().__init__(f"{label} {job_id} ended {state} (exit code {exit_code}){why}; logs: {self.logs}{collected}")


class JobInterrupted(NsyskitError):
    """Ctrl-C while a task ran or waited for a job: says what became of the job and where its files are (exit 130)."""

    exit_code = 130


class JobError(NsyskitError):
    """A job cannot be rendered, submitted or read back: names the job folder, record or scheduler answer, and the fix."""


class JobNotFound(JobError):
    """No job (job folder, run folder, container) answers to what a task was asked to act on."""


class EnrootMissing(NsyskitError):
    """enroot is not installed where 'invoke enroot-import' runs: says where to run it or how to install it."""


class NcclLogError(NsyskitError):
    """An NCCL log argument is unusable (missing, unreadable, bad range): names the argument, the value and the fix."""

    def __init__(self, what: str, value: object, problem: str, fix: str) -> None:
        self.what, self.value, self.problem, self.fix = what, value, problem, fix
        super().__init__(f"{what} {value!r}: {problem}; fix: {fix}")


class NcclTestsError(NsyskitError):
    """A nccl-tests output argument is unusable (missing, unreadable): names the file, the problem and the fix."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = path, problem, fix
        super().__init__(f"{path}: {problem}; fix: {fix}")


class NoNcclTestsTable(NcclTestsError):
    """A file (or run folder) holds no nccl-tests table: names it, says what it holds instead and the fix."""


class NcclTestsFailed(NsyskitError):
    """A nccl-tests run failed (wrong results, 'Test NCCL failure', out of memory): names the file and line."""

    exit_code = 3

    def __init__(self, where: str, message: str, more: int = 0) -> None:
        self.where = where
        extra = f" (and {more} more failure(s), listed above)" if more else ""
        super().__init__(f"{where}: {message}{extra}")


class BuildError(NsyskitError):
    """An image build failed: carries the failing step (number, total, instruction), the reason and the log tail."""

    def __init__(
        self,
        reason: str,
        step: int = 0,
        total: int = 0,
        instruction: str = "",
        log_tail: Sequence[str] = (),
        fix: str = "",
    ) -> None:
        self.reason, self.step, self.total, self.instruction = reason, step, total, instruction
        self.log_tail, self.fix = list(log_tail), fix
        where = f" at step {step}/{total} ({instruction})" if step else ""
        tail = " | ".join(line for line in self.log_tail[-3:] if line.strip() and line.strip() not in reason)
        super().__init__(
            f"image build failed{where}: {reason}"
            + (f"; fix: {fix}" if fix else "")
            + (f"; log tail: {tail}" if tail else "")
        )


class AnalysisError(NsyskitError):
    """A report cannot be analyzed: names the file, what is wrong with it and the fix."""

    def __init__(self, path: object, problem: str, fix: str = "") -> None:
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{self.path}: {problem}" + (f"; fix: {fix}" if fix else ""))


class ReportFileError(AnalysisError):
    """A report file is missing, empty, truncated, corrupt or not an Nsight Systems export."""


class NsysUnavailable(AnalysisError):
    """The nsys CLI is needed (export of a .nsys-rep, recipes) but is missing or lacks the feature."""


class RegressionFound(NsyskitError):
    """'invoke analyze --diff --fail-on-regression' found a metric that got worse by more than the threshold."""

    exit_code = 3


class PartialAnalysis(NsyskitError):
    """The analysis was made and written, but without some ranks (a report unreadable, a part missing): named at
    the top of every output; the distinct exit code tells a script the report is not whole."""

    exit_code = 4


class MergeWorkerError(NsyskitError):
    """A worker process of a merge stopped at an error: carries its block, the error's line and its exit code (the
    error itself does not travel between processes, its line does)."""

    def __init__(self, block: int, blocks: int, line: str, exit_code: int = 1) -> None:
        self.block, self.blocks, self.line, self.exit_code = block, blocks, line, exit_code
        super().__init__(f"block {block + 1} of {blocks} of the merge: {line}")
