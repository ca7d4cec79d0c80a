"""What replay handlers work with: a handler runs one stage again for one dead-letter
row, and its factory is given a `ReplayContext` whose clients the composition root
(`gateway.wiring.ops`) opens on first use and closes when the command ends.

Both the handlers and the replayer import this module, and it imports neither of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import Pool
from gateway.core.dlq.model import DlqRow
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.settlement.parts import SettlementParts


class StageHandler(Protocol):
    """Runs one stage again for one dead-letter row; returns on success, raises on failure.

    A handler must be idempotent (a replayed effect that already happened is a no-op)
    and must not write to `dlq_webhooks` itself: the replayer holds the row's lock and
    records the outcome, so a handler updating the row from another connection would
    wait for that lock for ever.
    """

    async def __call__(self, row: DlqRow) -> None: ...


class ReplayContext(Protocol):
    """What a handler factory may use during one replay command.

    The pool is the command's own. The broker and the settlement parts are opened on the
    first call and closed when the command ends, so a run with no row of a stage never
    connects to what that stage needs.
    """

    # The whole settings, not a section: the context is handed to every stage's handler
    # factory and the re-drive, which between them read the providers, `[outbox]`,
    # `[ordering]`, `[settlement]`, `[dlq]`, `[currency]` and `[forward]`.
    @property
    def settings(self) -> Settings: ...

    @property
    def pool(self) -> Pool: ...

    @property
    def metrics(self) -> Metrics: ...

    async def broker(self) -> JetStreamBroker:
        """A JetStream connection of the run's own (connecting in the background)."""
        ...

    async def settlement(self) -> SettlementParts:
        """The live settlement path's parts: ledger, rates, the `Settler`."""
        ...


#: Builds a stage's handler the first time a run needs it.
HandlerFactory = Callable[[ReplayContext], Awaitable[StageHandler]]
#: Stage name (`dlq_webhooks.stage`) -> the factory of the handler that replays it.
StageHandlers = Mapping[str, HandlerFactory]
