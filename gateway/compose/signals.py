"""Running a long-lived process (`relay`, `settle`) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable


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

        def on_signal() -> None:
            signals["count"] += 1
            if signals["count"] > 1:
                os._exit(130)  # the operator insists: stop now, as uvicorn does
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(runner())
