"""A Toxiproxy-shaped HTTP API over `FaultProxy`, and a client that speaks it.

Routes and bodies follow Toxiproxy's (v2) so the same client code, and the same
`curl` lines, drive either this or a real Toxiproxy server:

    GET    /proxies                          every proxy, with its toxics
    POST   /proxies                          {"name", "listen", "upstream", "enabled"}  → 201
    GET    /proxies/{name}
    POST   /proxies/{name}                   {"enabled": false}, {"blackhole": true}  (PATCH too)
    DELETE /proxies/{name}                                                          → 204
    GET    /proxies/{name}/toxics
    POST   /proxies/{name}/toxics            {"name", "type", "stream", "toxicity", "attributes"}
    GET    /proxies/{name}/toxics/{toxic}
    POST   /proxies/{name}/toxics/{toxic}    {"toxicity", "attributes"}  (PATCH too)
    DELETE /proxies/{name}/toxics/{toxic}                                           → 204
    POST   /reset                            enable every proxy, end every black hole,
                                             remove every toxic → 204
    GET    /version

`blackhole` is this proxy's own (Toxiproxy has no such switch; its clients ignore the
field): the network's view of a machine that vanished, see `chaos.proxy`.

Run it on its own with `python -m chaos.api --listen 127.0.0.1:8474`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chaos.proxy import FaultProxy
from chaos.toxics import Toxic, ToxicError, ToxicExists

VERSION = "chaos-faultproxy-1 (toxiproxy v2 API subset)"
Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """An error answered as Toxiproxy does: `{"error": ..., "status": ...}`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _host_port(text: str, field: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ApiError(f"{field} must be host:port, got {text!r}", 400)
    return host or "127.0.0.1", int(port)


class Registry:
    """The named proxies one API server manages."""

    def __init__(self) -> None:
        self.proxies: dict[str, FaultProxy] = {}

    def get(self, name: str) -> FaultProxy:
        try:
            return self.proxies[name]
        except KeyError:
            raise ApiError("proxy not found", 404) from None

    async def create(self, name: str, listen: str, upstream: str, enabled: bool) -> FaultProxy:
        if not name or not upstream:
            raise ApiError("missing required field: name and upstream", 400)
        if name in self.proxies:
            raise ApiError("proxy already exists", 409)
        listen_host, listen_port = _host_port(listen or "127.0.0.1:0", "listen")
        up_host, up_port = _host_port(upstream, "upstream")
        proxy = FaultProxy(up_host, up_port, listen_port, name=name, listen_host=listen_host)
        await proxy.start()
        await proxy.set_enabled(enabled)
        self.proxies[name] = proxy
        return proxy

    async def delete(self, name: str) -> None:
        await self.get(name).close()
        del self.proxies[name]

    async def reset(self) -> None:
        for proxy in self.proxies.values():
            proxy.reset_toxics()
            await proxy.set_blackhole(False)
            await proxy.set_enabled(True)

    async def close(self) -> None:
        for proxy in self.proxies.values():
            await proxy.close()
        self.proxies.clear()


async def _body(request: Request) -> dict[str, Any]:
    try:
        doc = await request.json()
    except ValueError:
        raise ApiError("bad request body", 400) from None
    if not isinstance(doc, dict):
        raise ApiError("bad request body: expected an object", 400)
    return doc


# Past the complexity bar on purpose: one route per fault the chaos harness can inject.
def build_app(registry: Registry) -> Starlette:  # noqa: C901
    """The API as an ASGI app over `registry`."""

    def guarded(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except ToxicError as exc:
                status = 409 if isinstance(exc, ToxicExists) else 400
                return JSONResponse({"error": str(exc), "status": status}, status)
            except ApiError as exc:
                return JSONResponse({"error": str(exc), "status": exc.status}, exc.status)

        return run

    async def index(request: Request) -> Response:
        return JSONResponse({n: p.to_json() for n, p in registry.proxies.items()})

    async def create(request: Request) -> Response:
        doc = await _body(request)
        proxy = await registry.create(
            str(doc.get("name", "")),
            str(doc.get("listen", "")),
            str(doc.get("upstream", "")),
            bool(doc.get("enabled", True)),
        )
        return JSONResponse(proxy.to_json(), 201)

    async def show(request: Request) -> Response:
        return JSONResponse(registry.get(request.path_params["proxy"]).to_json())

    async def update(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        doc = await _body(request)
        if "enabled" in doc:
            await proxy.set_enabled(bool(doc["enabled"]))
        if "blackhole" in doc:
            await proxy.set_blackhole(bool(doc["blackhole"]))
        return JSONResponse(proxy.to_json())

    async def delete(request: Request) -> Response:
        await registry.delete(request.path_params["proxy"])
        return Response(status_code=204)

    async def toxics(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        return JSONResponse([t.to_json() for t in proxy.toxics.values()])

    async def add_toxic(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        return JSONResponse(proxy.add(Toxic.from_json(await _body(request))).to_json())

    def _toxic(request: Request) -> tuple[FaultProxy, str]:
        proxy = registry.get(request.path_params["proxy"])
        name = request.path_params["toxic"]
        if name not in proxy.toxics:
            raise ApiError("toxic not found", 404)
        return proxy, name

    async def show_toxic(request: Request) -> Response:
        proxy, name = _toxic(request)
        return JSONResponse(proxy.toxics[name].to_json())

    async def update_toxic(request: Request) -> Response:
        proxy, name = _toxic(request)
        return JSONResponse(proxy.update_toxic(name, await _body(request)).to_json())

    async def delete_toxic(request: Request) -> Response:
        proxy, name = _toxic(request)
        proxy.remove_toxic(name)
        return Response(status_code=204)

    async def reset(request: Request) -> Response:
        await registry.reset()
        return Response(status_code=204)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": VERSION})

    routes = [
        Route("/proxies", guarded(index), methods=["GET"]),
        Route("/proxies", guarded(create), methods=["POST"]),
        Route("/proxies/{proxy}", guarded(show), methods=["GET"]),
        Route("/proxies/{proxy}", guarded(update), methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}", guarded(delete), methods=["DELETE"]),
        Route("/proxies/{proxy}/toxics", guarded(toxics), methods=["GET"]),
        Route("/proxies/{proxy}/toxics", guarded(add_toxic), methods=["POST"]),
        Route("/proxies/{proxy}/toxics/{toxic}", guarded(show_toxic), methods=["GET"]),
        Route("/proxies/{proxy}/toxics/{toxic}", guarded(update_toxic), methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}/toxics/{toxic}", guarded(delete_toxic), methods=["DELETE"]),
        Route("/reset", guarded(reset), methods=["POST"]),
        Route("/version", guarded(version), methods=["GET"]),
    ]
    return Starlette(routes=routes)


@contextlib.asynccontextmanager
async def serving(host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[tuple[str, Registry]]:
    """The API served in this event loop; yields its base URL and the registry."""
    registry = Registry()
    config = uvicorn.Config(
        build_app(registry), host=host, port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}", registry
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 5)
        await registry.close()


class ToxiproxyClient:
    """The calls the scenarios make, against this API or a real Toxiproxy."""

    def __init__(self, base_url: str) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, timeout=10)

    async def _call(self, method: str, path: str, json: Any = None) -> Any:
        response = await self._http.request(method, path, json=json)
        response.raise_for_status()
        return response.json() if response.content else None

    async def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> Any:
        doc = {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        return await self._call("POST", "/proxies", doc)

    async def proxies(self) -> Any:
        return await self._call("GET", "/proxies")

    async def set_enabled(self, name: str, enabled: bool) -> Any:
        return await self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    async def set_blackhole(self, name: str, on: bool) -> Any:
        """This proxy's own switch (a real Toxiproxy ignores it)."""
        return await self._call("POST", f"/proxies/{name}", {"blackhole": on})

    async def add_toxic(
        self, proxy: str, type: str, stream: str = "downstream", toxicity: float = 1.0, **attrs: Any
    ) -> Any:
        doc = {"type": type, "stream": stream, "toxicity": toxicity, "attributes": attrs}
        return await self._call("POST", f"/proxies/{proxy}/toxics", doc)

    async def remove_toxic(self, proxy: str, toxic: str) -> None:
        await self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    async def reset(self) -> None:
        await self._call("POST", "/reset")

    async def aclose(self) -> None:
        await self._http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.api", description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:8474", help="API address (host:port)")
    args = parser.parse_args()
    host, port = _host_port(args.listen, "--listen")

    async def run() -> None:
        async with serving(host, port) as (url, _):
            print(f"fault proxy API on {url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
