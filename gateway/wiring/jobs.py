"""The composition of `gateway dlq run-jobs` as a long-running process: its listener
(`/metrics`, `/livez`, `/readyz` on `[console] jobs_metrics_host:jobs_metrics_port`)
around the job runner of `gateway.dlq.jobs`.

The listener is bound first, so a port already taken stops start-up at once; until the
runner has opened its database, `/readyz` says `starting`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from gateway.adapters.jetstream.one_shot import open_one_shot_publisher
from gateway.core.health.readiness import Dependency
from gateway.dlq.jobs import JobRunner, RunnerOptions
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.settings import Settings
from gateway.wiring import health, ops


@contextlib.asynccontextmanager
async def job_runner(settings: Settings, options: RunnerOptions) -> AsyncIterator[JobRunner]:
    """Opened in order: the replay resources (traces, pool; NATS and the settlement parts
    on first use), the events publisher (connects on its first event), then the pool of
    the items' locks; closed in reverse."""
    async with (
        ops.replay_resources(settings) as ctx,
        open_one_shot_publisher(settings.nats, "gateway-dlq-jobs") as publisher,
        ops.database(settings, max_size=1) as claims,
    ):
        yield JobRunner(ctx, publisher, options, claims)


async def run_jobs(settings: Settings, options: RunnerOptions) -> int:
    """`gateway dlq run-jobs`: the number of jobs run (with `--once`)."""
    async with job_runner(settings, options) as runner:
        return await runner.run()


def jobs_metrics_address(settings: Settings) -> ListenAddress:
    """Where `gateway dlq run-jobs` serves its listener, from `[console]`."""
    section = settings.console
    return ListenAddress(
        section.jobs_metrics_host, section.jobs_metrics_port, "console.jobs_metrics_port"
    )


class _RunnerMetrics:
    """The runner's metrics once it has opened them (its replay resources own them);
    nothing before."""

    def __init__(self) -> None:
        self.source: Metrics | None = None

    def render(self) -> str:
        return "" if self.source is None else self.source.render()


async def run_job_runner(
    settings: Settings, options: RunnerOptions, listen: ListenAddress | None = None
) -> int:
    """`gateway dlq run-jobs` until cancelled; the number of jobs run.

    `/readyz` asks the database, the one dependency every job needs: NATS and the
    settlement side are opened by the first row that needs them, and a row that cannot
    reach them fails with its reason, recorded in the job, which the console shows.
    """
    metrics = _RunnerMetrics()
    readiness = health.Health()
    async with (
        metrics_listener(metrics, listen or jobs_metrics_address(settings), readiness),
        job_runner(settings, options) as runner,
    ):
        metrics.source = runner.ctx.metrics
        readiness.watch({Dependency.DATABASE: health.database(runner.pool)})
        try:
            return await runner.run()
        finally:
            readiness.forget()  # before the runner's pool is closed
