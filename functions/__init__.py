"""Lambda handlers: thin. Each parses its event, calls ``runtime.aws``, shapes the answer."""
