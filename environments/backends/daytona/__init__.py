"""The ``daytona`` backend: Daytona sandboxes through the ``daytona`` SDK (``sbx[daytona]``)."""

from .config import DaytonaConfig
from .environment import DaytonaEnvironment, reap_orphans

__all__ = ["DaytonaConfig", "DaytonaEnvironment", "reap_orphans"]
