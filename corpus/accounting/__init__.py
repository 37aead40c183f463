"""Accounting, read from datatrove's own per-task stats: every record of every arm through
extraction (`summary`) and through every later stage to the budget (`ledger`)."""
