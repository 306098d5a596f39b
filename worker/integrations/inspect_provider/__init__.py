"""The ``sbx`` sandbox environment of inspect_ai (``pip install 'sbx[inspect]'``).

Importing this package registers ``sbx`` with inspect_ai, which it does itself through
the ``inspect_ai`` entry point of sbx's distribution: an eval names it with
``sandbox="sbx"``, ``sandbox=("sbx", "docker")`` (a backend), ``--sandbox sbx:docker``,
or ``sandbox=SandboxEnvironmentSpec("sbx", SbxSandboxConfig(...))``. See
docs/integrations.md.
"""

from worker.integrations.inspect_provider.config import SbxSandboxConfig
from worker.integrations.inspect_provider.environment import SbxSandboxEnvironment

__all__ = ["SbxSandboxConfig", "SbxSandboxEnvironment"]
