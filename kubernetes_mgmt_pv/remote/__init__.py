"""Remote execution: SSH sessions, host keys, facts, concurrency caps,
idempotent file and package steps."""
