"""Where an audit's jobs run: in this process (``local``) or as Ray tasks (``ray``).

:func:`privaudit.executor.plan.audit_jobs` turns an audit into a graph of jobs (train one
model, compute one pool's logits, attack one target, build the report); an executor runs
that graph. Both executors write the same config-hashed workspace and, with the same
number of threads per job, compute the same numbers.
"""

from privaudit.executor.local import LocalExecutor
from privaudit.executor.plan import Job, audit_jobs

EXECUTORS = ("local", "ray")


def make_executor(name: str, *, address: str | None = None, cpus_per_job: int | None = None,
                  max_retries: int | None = None):
    """The executor called ``name`` (``local`` or ``ray``); ``cpus_per_job`` defaults to this
    process's torch thread count, so both executors compute with the same threads."""
    import torch

    from privaudit.errors import ConfigError

    threads = cpus_per_job or torch.get_num_threads()
    if name == "local":
        return LocalExecutor(threads=cpus_per_job)
    if name == "ray":
        from privaudit.executor.ray_backend import DEFAULT_RETRIES, RayExecutor, _import_ray

        _import_ray()  # fail early, in one line, when Ray is not installed
        return RayExecutor(address=address, cpus_per_job=threads,
                           max_retries=DEFAULT_RETRIES if max_retries is None else max_retries)
    raise ConfigError(f"`executor` must be one of {', '.join(EXECUTORS)} (got {name!r})")


__all__ = ["EXECUTORS", "Job", "LocalExecutor", "audit_jobs", "make_executor"]
