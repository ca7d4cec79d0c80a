"""Running a long-lived process (`relay`, `settle`) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

#: A stop that has not finished this long after the signal is asked again: a library
#: that swallows a cancellation (nats-py's pull `fetch` has been seen to) must not keep
#: the process running. Nothing is lost by it: unacknowledged messages are redelivered
#: and open transactions roll back.
RECANCEL_AFTER_S = 5.0
#: ... and a stop that still has not finished after this long ends the process, as
#: uvicorn's graceful-shutdown timeout does for `serve`.
STOP_DEADLINE_S = 30.0


def run_until_signalled(main: Callable[[], Awaitable[None]]) -> None:
    """Run `main` until it returns or SIGINT/SIGTERM arrives; a second signal forces exit.

    The long-running commands (`relay`, `settle`) run on uvloop, as `serve` does, when it
    is installed (uvicorn[standard] brings it): they spend most of their time in the
    event loop and socket I/O, where the default loop cost the relay about a fifth more
    CPU per message.
    """
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        signals = {"count": 0}

        def ask_again() -> None:
            if not task.done():
                log.warning("still stopping; cancelling again", extra={"after_s": RECANCEL_AFTER_S})
                task.cancel()
                loop.call_later(RECANCEL_AFTER_S, ask_again)

        def give_up() -> None:
            if not task.done():
                log.error("did not stop in time; exiting", extra={"after_s": STOP_DEADLINE_S})
                os._exit(1)

        def on_signal() -> None:
            signals["count"] += 1
            if signals["count"] > 1:
                os._exit(130)  # the operator insists: stop now, as uvicorn does
            task.cancel()
            loop.call_later(RECANCEL_AFTER_S, ask_again)
            loop.call_later(STOP_DEADLINE_S, give_up)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            # Back to the defaults: left bound to a closed loop, a signal during the
            # interpreter's exit would be swallowed rather than end the process.
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    asyncio.run(runner())
