"""The ``modal`` backend (Modal Sandboxes through the ``modal`` SDK); see :mod:`.environment`."""
