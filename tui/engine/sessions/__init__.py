"""Sessions: every run recorded as it happens (`recorder`, `file`), played back as an engine with no
server (`replay`), compared with other runs (`compare`), and exported for other tools (`exports`)."""
