"""The ``daytona`` backend: Daytona sandboxes through the ``daytona`` SDK (``sbx[daytona]``)."""
