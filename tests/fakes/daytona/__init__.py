"""A fake Daytona (API + toolbox) on 127.0.0.1 that runs commands for real, for the SDK.

See :mod:`.server` for the facade tests use, :mod:`.api` and :mod:`.toolbox`
for the wire protocol, :mod:`.jail` for how a sandbox's processes are isolated.
"""

from .server import FAKE_TOKEN, SDK_VERSION, FakeDaytona

__all__ = ["FAKE_TOKEN", "SDK_VERSION", "FakeDaytona"]
