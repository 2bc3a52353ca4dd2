"""The operator's command line: `memworker ...` (main.py builds the parser; one module per
group of sub-commands; common.py holds what they share)."""
