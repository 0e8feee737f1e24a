"""The console's slash commands: the table (table.py) and the groups it lists."""
