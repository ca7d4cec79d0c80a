"""DLQ replay of `stage = 'forward:NAME'` rows: one more attempt to the destination
`[forward.NAME]` declares, signed as its forwarder signs, with the same `webhook-id`, so
the target can tell the replay from a new event. A destination given only by flags has
no table to take its target and secret from: its rows fail as having no handler. A stream
message the forwarder could not read (`STREAM_MESSAGE_UNREADABLE`) is never sent."""

from __future__ import annotations

import time
from collections.abc import Mapping

from gateway.adapters.http_target import HttpTarget, refuse_private
from gateway.adapters.postgres import connection
from gateway.adapters.postgres.forwarding import event_place
from gateway.core.dlq.model import DlqRow
from gateway.core.events.model import forward_stage
from gateway.core.forward.request import ForwardedEvent, delivery_request
from gateway.core.forward.retry import Verdict, answer_message, decide, permanent_4xx
from gateway.dlq.parts import HandlerFactory, ReplayContext, StageHandler
from gateway.errors import (
    ErrorClass,
    ForwardAttemptsExhausted,
    ForwardRefused,
    StreamMessageUnreadable,
)
from gateway.settings.forward import ForwardOptions


def forward_handlers(destinations: Mapping[str, ForwardOptions]) -> dict[str, HandlerFactory]:
    """The handler factory of each declared destination's stage."""
    return {forward_stage(name): _factory(options) for name, options in destinations.items()}


def _factory(options: ForwardOptions) -> HandlerFactory:
    async def build(ctx: ReplayContext) -> StageHandler:
        if not options.allow_private:
            refuse_private(options.url)

        async def replay_forward(row: DlqRow) -> None:
            if row.error_class == ErrorClass.STREAM_MESSAGE_UNREADABLE:
                # Its id is made up, not the sender's: sending it would invent an event.
                raise StreamMessageUnreadable(
                    "replay: the row holds a stream message that carried no event; "
                    "nothing is sent (resolve it with a note)"
                )
            event_type, order_key, key_seq = "", None, None
            if row.webhook_id is not None:
                async with connection(ctx.pool) as conn:
                    event_type, order_key, key_seq = await event_place(conn, row.webhook_id)
            event = ForwardedEvent(
                provider=row.provider,
                event_id=row.event_id,
                event_type=event_type,
                received_at=row.received_at.isoformat(),
                body=row.payload,
                order_key=order_key,
                key_seq=key_seq,
            )
            body, headers = delivery_request(
                event,
                row.attempts + 1,
                int(time.time()),
                resign_as=options.resign_as,
                secrets=options.secrets,
                wrap=options.envelope,
            )
            target = HttpTarget(
                options.url,
                timeout_s=options.timeout_s,
                verify_tls=options.verify_tls,
                max_connections=1,
                allow_private=options.allow_private,
            )
            try:
                attempted = await target.post(body, headers)
            finally:
                await target.close()
            # The replay is one attempt: any answer but a 2xx leaves the row open.
            decision = decide(
                attempted.answer, 1, (), park_on_4xx=True, now_s=time.time(), rand=lambda: 0.5
            )
            if decision.verdict is Verdict.DELIVERED:
                return
            message = answer_message(f"replay: {decision.reason}", attempted.excerpt)
            status = attempted.answer.status
            if status is not None and permanent_4xx(status):
                raise ForwardRefused(message)
            raise ForwardAttemptsExhausted(message)

        return replay_forward

    return build
