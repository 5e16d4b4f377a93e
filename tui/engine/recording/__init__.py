"""A run as it happened, written down: the session file's format, its plain-data codec and the recorder the
handle drives."""
