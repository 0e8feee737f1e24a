"""The SQLite file itself: connecting, migrating, transactions, the drivers' errors,
private and whole-file writes, backup, replication, interruptible reads."""
