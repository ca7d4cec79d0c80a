"""`gateway listen` as a developer sees it: run in a real terminal (tmux), its screen
read back with `capture-pane`. It prints the secret it signs with, one line per attempt
(`--fail-first 1` shows a retry without any proxy), and a summary at Ctrl-C; the handler
verifies the delivery with the printed secret and the official library."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import standardwebhooks

from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.forward_target import Target, always, serving
from tests.support.forwarding import post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import unique_name
from tests.support.settlement import fetch

TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux not installed (Debian package 'tmux'; scripts/setup.sh installs it)"
)


def tmux(*args: str) -> str:
    assert TMUX is not None
    return subprocess.run(
        [TMUX, *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout


async def screen_shows(session: str, pattern: str, timeout_s: float = 30.0) -> str:
    """The pane's text once it matches `pattern`; fail with the screen otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = tmux("capture-pane", "-p", "-J", "-t", session)
        if re.search(pattern, text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen never showed {pattern!r}:\n{text}")
        await asyncio.sleep(0.1)


async def test_listen_shows_its_secret_each_attempt_and_a_summary(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    doc = config(database_url, nats_url)
    path = write_toml(tmp_path / "gateway.toml", doc)
    session = unique_name("listen")
    async with running_server(doc) as server, serving(Target()) as target:
        command = (
            f"{GATEWAY} listen --config {path} --to {target.url} --fail-first 1 "
            "--log-level WARNING 2>>"
            f"{tmp_path / 'stderr.log'}; echo EXITED $?; sleep 30"
        )
        tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", command)
        try:
            ready = await screen_shows(session, r"Your webhook signing secret is whsec_\S+")
            secret = re.search(r"signing secret is (whsec_\S+)", ready)
            assert secret is not None
            assert "Forwarding every event to " + target.url in ready
            await post_stripe(server.client, "evt_tty_1", "pi_tty")
            text = await screen_shows(session, r"→ 200 .*\(attempt 2\)")
            first = re.search(
                r"\d\d:\d\d:\d\d  stripe  payment_intent\.succeeded  evt_tty_1  → 503  \d+ ms  "
                r"\(attempt 1\)  retry in \d\.\d s",
                text,
            )
            assert first is not None, text
            assert re.search(
                r"stripe  payment_intent\.succeeded  evt_tty_1  → 200  \d+ ms  \(attempt 2\)",
                text,
            )
            request = target.delivered()[0]
            standardwebhooks.Webhook(secret.group(1)).verify(request.body, request.headers)
            tmux("send-keys", "-t", session, "C-c")
            done = await screen_shows(session, r"EXITED \d+")
            assert "forwarded 1, retried 1, parked 0" in done
            assert "EXITED 0" in done
        finally:
            subprocess.run([TMUX or "tmux", "kill-session", "-t", session], check=False, timeout=10)


async def test_listen_keeps_logs_off_its_screen_and_resolves_its_dead_letters_at_stop(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """Finding 15 of the fourth hardening review: with stderr on the terminal and no
    --log-level, the screen holds the attempt lines and no JSON log line; the event the
    handler refused is parked at the run's own stage while it runs, and resolved as
    `run_stopped` once Ctrl-C stops it, so nothing stays open beside production's."""
    doc = config(database_url, nats_url)
    path = write_toml(tmp_path / "gateway.toml", doc)
    session = unique_name("listen")
    async with running_server(doc) as server, serving(Target(always(400))) as target:
        command = (
            # Nothing asks for logs: not even a GATEWAY_LOG_LEVEL the tmux server kept.
            f"env -u GATEWAY_LOG_LEVEL {GATEWAY} listen --config {path} --to {target.url} "
            "--park-on-4xx; "
            "echo EXITED $?; sleep 30"
        )
        tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", command)
        try:
            await screen_shows(session, r"Your webhook signing secret is whsec_\S+")
            await post_stripe(server.client, "evt_tty_parked", "pi_tty_parked")
            await screen_shows(session, r"evt_tty_parked  → 400 .*parked as dead letter \d+")
            rows = await fetch(
                database_url, "SELECT stage, is_resolved FROM dlq_webhooks WHERE event_id = $1",
                "evt_tty_parked",
            )  # fmt: skip
            assert len(rows) == 1 and rows[0]["stage"].startswith("forward:listen-")
            assert rows[0]["is_resolved"] is False  # open while the run can still retry it
            tmux("send-keys", "-t", session, "C-c")
            done = await screen_shows(session, r"EXITED \d+")
            assert "its 1 dead letters resolved as it stopped" in done
            assert "EXITED 0" in done
            json_lines = [line for line in done.splitlines() if line.lstrip().startswith("{")]
            assert json_lines == [], done
        finally:
            subprocess.run([TMUX or "tmux", "kill-session", "-t", session], check=False, timeout=10)
    rows = await fetch(
        database_url,
        "SELECT is_resolved, resolution, resolved_by FROM dlq_webhooks WHERE event_id = $1",
        "evt_tty_parked",
    )
    assert [tuple(r.values()) for r in rows] == [(True, "run_stopped", rows[0]["resolved_by"])]
    assert str(rows[0]["resolved_by"]).startswith("gateway:listen-")
