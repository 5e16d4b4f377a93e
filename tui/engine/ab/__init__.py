"""Face process: two endpoints under one steered load (``--ab``), `pair.AbPair`, one `Engine` over two."""
