"""`gateway currency-stub`: a stand-in currency-service for development, tests and chaos.

Answers `GET /rates/{BASE}/{QUOTE}` like the real service (`{"rate", "as_of"}`, 404 for
a pair it does not quote) from a table of configurable rates; the inverse of a listed
pair and a currency against itself are quoted too. `POST /control` changes its
behaviour at run time:

    {"mode": "ok" | "fail" | "stall", "stall_s": 5, "as_of_age_s": 0,
     "rates": {"EUR/USD": "1.09"}}

`fail` answers 503; `stall` sleeps `stall_s` before answering; `as_of_age_s` back-dates
`as_of` to imitate a service serving stale data. `GET /control` shows the state,
including how many rate requests arrived.
"""

from __future__ import annotations

import asyncio
import decimal
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

DEFAULT_RATES: dict[str, Decimal] = {
    "EUR/USD": Decimal("1.08"),
    "GBP/USD": Decimal("1.27"),
    "CHF/USD": Decimal("1.13"),
    "USD/JPY": Decimal("150.25"),
    "USD/CAD": Decimal("1.36"),
    "KWD/USD": Decimal("3.25"),
    "BHD/USD": Decimal("2.65"),
    # The corridors: lira, rials and the USDT stablecoin, as the currency-service quotes
    # them (it quotes USDT/IRR and IRR/TRY, and refuses IRR/USDT: `REFUSED_PAIRS`).
    "USD/TRY": Decimal("34.50"),
    "USD/IRR": Decimal("1050000"),
    "USDT/USD": Decimal("0.9998"),
    "USDT/IRR": Decimal("1049500"),
    "TRY/USDT": Decimal("0.02899"),
    "IRR/TRY": Decimal("0.00003286"),
}
#: Pairs the currency-service refuses although it quotes their inverse: answered 404,
#: as the service does, so the gateway's rules for an unsupported pair are exercised.
REFUSED_PAIRS: frozenset[tuple[str, str]] = frozenset({("IRR", "USDT")})


class StubMode(enum.StrEnum):
    """How the stub answers rate requests."""

    OK = "ok"
    FAIL = "fail"
    STALL = "stall"


@dataclass
class StubState:
    """The stub's mutable behaviour, shared by its handlers."""

    rates: dict[tuple[str, str], Decimal]
    mode: StubMode = StubMode.OK
    stall_s: float = 5.0
    as_of_age_s: float = 0.0
    requests: int = 0
    served: dict[str, int] = field(default_factory=dict)

    def lookup(self, base: str, quote: str) -> Decimal | None:
        """The rate for a pair: listed, the inverse of a listed one, or 1 for itself."""
        if base == quote:
            return Decimal(1)
        if (base, quote) in REFUSED_PAIRS and (base, quote) not in self.rates:
            return None
        if (base, quote) in self.rates:
            return self.rates[(base, quote)]
        inverse = self.rates.get((quote, base))
        if inverse is None:
            return None
        with decimal.localcontext() as ctx:
            ctx.prec = 12
            return Decimal(1) / inverse

    def describe(self) -> dict[str, Any]:
        """The state as JSON."""
        return {
            "mode": self.mode.value,
            "stall_s": self.stall_s,
            "as_of_age_s": self.as_of_age_s,
            "requests": self.requests,
            "served": dict(self.served),
            "rates": {f"{b}/{q}": str(r) for (b, q), r in sorted(self.rates.items())},
        }


def parse_pair_rate(text: str) -> tuple[str, Decimal]:
    """`EUR/USD=1.08` → ("EUR/USD", Decimal("1.08")); ValueError when malformed."""
    pair, sep, value = text.partition("=")
    base, slash, quote = pair.strip().upper().partition("/")
    if not (sep and slash and base.isalpha() and quote.isalpha()):
        raise ValueError(f"expected BASE/QUOTE=RATE, got {text!r}")
    try:
        rate = Decimal(value.strip())
    except decimal.InvalidOperation:
        raise ValueError(f"rate {value!r} is not a number") from None
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"rate {value!r} must be positive")
    return f"{base}/{quote}", rate


def _rate_table(rates: Mapping[str, Decimal | str]) -> dict[tuple[str, str], Decimal]:
    table: dict[tuple[str, str], Decimal] = {}
    for pair, value in rates.items():
        key, rate = parse_pair_rate(f"{pair}={value}")
        base, _, quote = key.partition("/")
        table[(base, quote)] = rate
    return table


def build_app(rates: Mapping[str, Decimal | str] | None = None) -> Starlette:
    """The stub as an ASGI app; `rates` like `{"EUR/USD": "1.08"}` (default: a small table)."""
    state = StubState(rates=_rate_table(DEFAULT_RATES if rates is None else rates))

    async def get_rate(request: Request) -> JSONResponse:
        base = request.path_params["base"].upper()
        quote = request.path_params["quote"].upper()
        state.requests += 1
        if state.mode is StubMode.FAIL:
            return JSONResponse({"error": "unavailable (stub in fail mode)"}, status_code=503)
        if state.mode is StubMode.STALL:
            await asyncio.sleep(state.stall_s)
        rate = state.lookup(base, quote)
        if rate is None:
            return JSONResponse({"error": f"unsupported pair {base}/{quote}"}, status_code=404)
        pair = f"{base}/{quote}"
        state.served[pair] = state.served.get(pair, 0) + 1
        as_of = datetime.now(UTC) - timedelta(seconds=state.as_of_age_s)
        return JSONResponse({"rate": str(rate), "as_of": as_of.isoformat()})

    async def get_control(request: Request) -> JSONResponse:
        return JSONResponse(state.describe())

    async def post_control(request: Request) -> JSONResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            mode = StubMode(body.get("mode", state.mode))
            stall_s = float(body.get("stall_s", state.stall_s))
            as_of_age_s = float(body.get("as_of_age_s", state.as_of_age_s))
            new_rates = _rate_table(body.get("rates") or {})
            if stall_s < 0:
                raise ValueError("stall_s must not be negative")
        except (ValueError, TypeError) as exc:  # JSONDecodeError is a ValueError
            return JSONResponse({"error": str(exc)}, status_code=400)
        state.mode, state.stall_s, state.as_of_age_s = mode, stall_s, as_of_age_s
        state.rates.update(new_rates)
        return JSONResponse(state.describe())

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/rates/{base}/{quote}", get_rate, methods=["GET"]),
            Route("/control", get_control, methods=["GET"]),
            Route("/control", post_control, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
    app.state.stub = state
    return app


def serve(rates: Mapping[str, Decimal], host: str, port: int) -> None:
    """Serve the stub with `rates` until interrupted."""
    uvicorn.run(build_app(rates), host=host, port=port, log_level="info")
