"""The console harness's fixtures for every test in this folder."""

from tests.support.console import console, console_factory

__all__ = ["console", "console_factory"]
