"""The general tools: --user-dir, averaging, scoring, reports, Table 3, conversion."""
