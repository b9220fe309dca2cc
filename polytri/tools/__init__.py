"""The ``polytri`` command and what it runs: ``compile``, ``demo``, ``bench`` (with the machine's peaks),
the loader of ``FILE.py[:NAME]`` and the logging set-up."""
