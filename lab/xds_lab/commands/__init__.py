"""The lab's ``xds-control`` subcommands (``sim``, ``demo``, ``bench``), one module each."""
