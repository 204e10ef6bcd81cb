"""What every rule and report reads of a session, worked out once (``session.analysis_of``):
the typed commands (``commands``, ``shell``), the results' outcomes (``outcome``), the process
ledger (``ledger``), subagent families (``family``); and the rule files' typed parameters and
phrase lists (``params``, ``phrases``).

This file imports nothing, so what needs only the parameters (the configuration, a batch rerun
that scans nothing) does not load the analysis.
"""
