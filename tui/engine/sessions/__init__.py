"""Work over saved runs: compared with other runs (`compare`, `baseline`), their load schedule read back
(`schedule`), and exported for other tools (`trace_export`). The format and the recorder are
`tui.engine.recording`; playback is `tui.engine.host.playback_engine`."""
